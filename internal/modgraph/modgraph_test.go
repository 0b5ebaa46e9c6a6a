package modgraph_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/testenv"
)

// maxModules bounds `go list -m all` of a module that imports only the
// light packages (the consumer itself counted). The OpenTelemetry API's own
// go.mod files bring most of them.
const maxModules = 25

// heavy are module path prefixes that belong to the optional parts (the
// command, the console's tests, the SQL stores, the actuator, the codecs).
var heavy = []string{
	"github.com/chromedp/",
	"github.com/spf13/cobra",
	"github.com/go-sql-driver/mysql",
	"modernc.org/",
	"github.com/jackc/",
	"github.com/prometheus/",
	"go.opentelemetry.io/otel/exporters/prometheus",
	"github.com/hamba/avro",
	"google.golang.org/protobuf",
	"github.com/pelletier/go-toml",
	"go.yaml.in/yaml",
	"gopkg.in/yaml",
	"github.com/goccy/go-yaml",
}

// otelOwn are heavy modules the OpenTelemetry API's go.mod files require
// for their own tests (testify's YAML). They may appear in the graph, but
// only as a requirement of an OpenTelemetry module, never of AceMQ's.
var otelOwn = []string{"go.yaml.in/yaml", "gopkg.in/yaml"}

// TestALightImportBringsNoHeavyModule makes a throwaway module for each
// set of light packages, points it at this working tree with a replace,
// runs `go mod tidy` and reads `go list -m all` and `go mod graph`: what a
// user's go.mod would select. It checks the module graph rather than the
// root go.mod's require lines because minimal version selection also sees
// the go.mod files of the modules the root requires, and that is what a
// user's build can be raised by.
func TestALightImportBringsNoHeavyModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy in throwaway modules; not in -short")
	}
	root := testenv.RepoRoot(t)
	version := currentVersion(t, root)
	const mod = "github.com/acemq-go/acemq"
	for _, tc := range []struct {
		name    string
		imports []string
	}{
		{"root", []string{mod}},
		{"transport", []string{mod + "/transport", mod + "/transport/memory", mod + "/transport/rabbitmq"}},
		{"header", []string{mod + "/header"}},
		{"security", []string{mod + "/security"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			gomod := "module example.com/consumer\n\ngo 1.26.0\n\nrequire " + mod + " " + version + "\n\nreplace " + mod + " " + version + " => " + root + "\n"
			var src strings.Builder
			src.WriteString("package main\n\nimport (\n")
			for _, p := range tc.imports {
				src.WriteString("\t_ \"" + p + "\"\n")
			}
			src.WriteString(")\n\nfunc main() {}\n")
			write(t, filepath.Join(dir, "go.mod"), gomod)
			write(t, filepath.Join(dir, "main.go"), src.String())

			goCmd(t, dir, "mod", "tidy")
			all := strings.Fields(goCmd(t, dir, "list", "-m", "-f", "{{.Path}}", "all"))
			graph := goCmd(t, dir, "mod", "graph")
			if len(all) > maxModules {
				t.Errorf("importing %v puts %d modules in go list -m all, more than %d:\n%s", tc.imports, len(all), maxModules, strings.Join(all, "\n"))
			}
			for _, m := range all {
				if !isHeavy(m) {
					continue
				}
				by := requirers(graph, m)
				if isOtelOwn(m) && allOtel(by) {
					continue
				}
				t.Errorf("importing %v puts %s in the module graph (required by %v); the part that needs it belongs in a module of its own", tc.imports, m, by)
			}
		})
	}
}

func write(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir outside any workspace, with the
// environment's GOPROXY (the module cache answers when it holds them).
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

func isHeavy(m string) bool {
	for _, h := range heavy {
		if strings.HasPrefix(m, h) {
			return true
		}
	}
	return false
}

func isOtelOwn(m string) bool {
	for _, h := range otelOwn {
		if strings.HasPrefix(m, h) {
			return true
		}
	}
	return false
}

// requirers returns the modules whose go.mod requires m, from `go mod
// graph` lines ("a@v b@v").
func requirers(graph, m string) []string {
	var by []string
	for _, line := range strings.Split(graph, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.SplitN(f[1], "@", 2)[0] == m {
			by = append(by, strings.SplitN(f[0], "@", 2)[0])
		}
	}
	return by
}

func allOtel(mods []string) bool {
	for _, m := range mods {
		if !strings.HasPrefix(m, "go.opentelemetry.io/") {
			return false
		}
	}
	return len(mods) > 0
}

// TestEveryModuleIsInTheWorkspaceAndHasNoReplace reads every go.mod of the
// repository: each must be a use line of go.work (the Makefile's test,
// lint and bench targets run the modules go.work lists, so a module
// missing there would go untested), and none may carry a replace directive
// (`go install github.com/acemq-go/acemq/cmd/acemq@v…` refuses a module
// with one; the workspace's replaces live in go.work).
func TestEveryModuleIsInTheWorkspaceAndHasNoReplace(t *testing.T) {
	root := testenv.RepoRoot(t)
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	inUse := false
	for _, line := range strings.Split(string(work), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "use (":
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "":
			used[filepath.Clean(line)] = true
		}
	}
	if !used["."] {
		t.Fatalf("go.work does not use the root module; read %v", used)
	}
	found := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		found++
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if !used[dir] {
			t.Errorf("%s has a go.mod that go.work does not use; add ./%s to go.work's use block (go work use) and run scripts/modules.sh work", dir, dir)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "replace") {
				t.Errorf("%s/go.mod has a replace directive (%s); go install refuses such a module: put the replace in go.work", dir, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found != len(used) {
		t.Errorf("go.work uses %d modules, the repository has %d go.mod files", len(used), found)
	}
}
