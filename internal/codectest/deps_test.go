package codectest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// codecLibraries are the third-party libraries the codec/ packages use;
// a program that imports only the root package must link none of them.
var codecLibraries = map[string]string{
	"codec/avro":     "github.com/hamba/avro/v2",
	"codec/toml":     "github.com/pelletier/go-toml/v2",
	"codec/yaml":     "go.yaml.in/yaml/v3",
	"codec/protobuf": "google.golang.org/protobuf",
}

// deps runs `go list` once and returns each package's transitive
// dependencies (what `go list -deps` prints for it alone).
func deps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[f[0]] = f[1:]
	}
	return m
}

func linked(list []string, module string) bool {
	for _, p := range list {
		if p == module || strings.HasPrefix(p, module+"/") {
			return true
		}
	}
	return false
}

// TestTheRootPackageLinksNoCodecLibrary is the `go list -deps` evidence
// that the codecs cost nothing to a program that does not import them,
// checked against each codec package linking its own library (so the
// test would notice a library moving behind another path).
func TestTheRootPackageLinksNoCodecLibrary(t *testing.T) {
	const mod = "github.com/acemq-go/acemq"
	pkgs := []string{mod}
	for pkg := range codecLibraries {
		pkgs = append(pkgs, mod+"/"+pkg)
	}
	all := deps(t, pkgs...)
	root := all[mod]
	if len(root) == 0 {
		t.Fatal("go list gave no dependencies for the root package")
	}
	for pkg, lib := range codecLibraries {
		if linked(root, lib) {
			t.Errorf("importing github.com/acemq-go/acemq links %s; it must stay behind %s", lib, pkg)
		}
		if !linked(all[mod+"/"+pkg], lib) {
			t.Errorf("%s no longer links %s; update codecLibraries", pkg, lib)
		}
	}
	if linked(root, "encoding/xml") {
		t.Error("importing github.com/acemq-go/acemq links encoding/xml; it must stay behind codec/xml")
	}
}
