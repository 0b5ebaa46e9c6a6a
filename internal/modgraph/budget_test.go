package modgraph_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/testenv"
)

// A budget is what a user who imports one module's main package gets in
// their module graph: at most max modules in `go list -m all` (the
// consumer itself counted), nothing on the never list unless it is on the
// module's own list (brings: the dependency the module exists to carry) or
// the user chose it (with: packages the consumer imports beside the
// module's, such as a SQL driver). docs/installing.md's table shows the
// same numbers.
type budget struct {
	dir    string   // the module's directory ("." for the root)
	pkg    string   // the package a user imports, relative to the root path
	with   []string // packages the user also imports (their choice)
	brings []string // module path prefixes the module exists to carry
	// tolerated are never-list prefixes a sibling module brings, each
	// named in docs/installing.md (the outbox's SQLite under pgnotify).
	tolerated []string
	max       int
}

// never are module path prefixes no module may bring a user who did not
// ask for them: the SQL drivers (and the MySQL driver's one dependency),
// the command's CLI library, the repository's own test helpers and tools.
var never = []string{
	"github.com/jackc/",
	"github.com/go-sql-driver/",
	"filippo.io/edwards25519",
	"modernc.org/",
	"github.com/spf13/",
	"github.com/acemq-go/acemq/internal/",
	"github.com/acemq-go/acemq/bench",
	"github.com/acemq-go/acemq/examples",
	"github.com/acemq-go/acemq/dashboards",
	"golang.org/x/mod",
	"github.com/chromedp/",
	"github.com/prometheus/",
	"go.opentelemetry.io/otel/exporters/",
	"github.com/hamba/avro",
	"google.golang.org/protobuf",
	"github.com/pelletier/go-toml",
	"go.yaml.in/yaml",
	"gopkg.in/yaml",
}

const sqlite = "modernc.org/sqlite"

// chosen maps a package a user may import (budget.with) to the module
// path prefixes that choice brings.
var chosen = map[string][]string{sqlite: {"modernc.org/"}}

// chromedpOwn is what console's go.mod lists for its browser tests
// (chromedp and its protocol libraries): in a console user's graph, never
// linked. The one test dependency left in a published go.mod; see
// docs/installing.md.
var chromedpOwn = []string{"github.com/chromedp/", "github.com/gobwas/", "github.com/go-json-experiment/", "github.com/ledongthuc/", "github.com/orisano/"}

var budgets = []budget{
	{dir: ".", pkg: "", max: 25},
	{dir: "actuator", pkg: "actuator", brings: []string{"github.com/prometheus/", "go.opentelemetry.io/otel/exporters/prometheus", "google.golang.org/protobuf"}, max: 55},
	{dir: "console", pkg: "console", brings: chromedpOwn, max: 29},
	{dir: "codec/avro", pkg: "codec/avro", brings: []string{"github.com/hamba/avro"}, max: 41},
	{dir: "codec/protobuf", pkg: "codec/protobuf", brings: []string{"google.golang.org/protobuf"}, max: 28},
	{dir: "codec/schemas", pkg: "codec/schemas", max: 3},
	{dir: "codec/toml", pkg: "codec/toml", brings: []string{"github.com/pelletier/go-toml"}, max: 27},
	{dir: "codec/yaml", pkg: "codec/yaml", brings: []string{"go.yaml.in/yaml"}, max: 26},
	{dir: "sqlstore", pkg: "sqlstore", max: 2},
	{dir: "outbox", pkg: "outbox", with: []string{sqlite}, max: 50},
	{dir: "outbox/pgnotify", pkg: "outbox/pgnotify", brings: []string{"github.com/jackc/"}, tolerated: []string{"modernc.org/"}, max: 45},
	{dir: "idempotency", pkg: "idempotency", max: 27},
	{dir: "saga", pkg: "saga", with: []string{sqlite}, max: 51},
	{dir: "claimcheck", pkg: "claimcheck", brings: []string{"github.com/hamba/avro"}, max: 34},
	{dir: "stream", pkg: "stream", max: 27},
}

// TestEachModuleBringsOnlyWhatItsUsersChose makes a throwaway module per
// published module that imports its main package (and, for the outbox and
// the saga, the SQLite driver, as their examples do), replaces every AceMQ
// module by its directory in this working tree, runs `go mod tidy` and
// reads `go list -m all`: the graph a user's go.mod selects from, which
// holds every go.mod requirement of the modules it requires, test-only
// ones included (that is why no published module lists a SQL driver for
// its tests; scripts/sqldrivers.sh).
func TestEachModuleBringsOnlyWhatItsUsersChose(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go mod tidy in throwaway modules; not in -short")
	}
	root := testenv.RepoRoot(t)
	version := currentVersion(t, root)
	published := modulesList(t, root, "published")
	covered := map[string]bool{}
	for _, b := range budgets {
		covered[b.dir] = true
	}
	for _, m := range published {
		if !covered[m] && m != "cmd/acemq" {
			t.Errorf("module %s is published but has no budget here; add one (and a row to docs/installing.md)", m)
		}
	}
	replaces := replaceAll(t, root, version)
	for _, b := range budgets {
		t.Run(strings.ReplaceAll(b.dir, "/", "_"), func(t *testing.T) {
			t.Parallel()
			mod := pathOf(b.dir)
			pkg := strings.TrimSuffix(rootPath+"/"+b.pkg, "/")
			dir := t.TempDir()
			gomod := "module example.com/consumer\n\ngo 1.26.0\n\nrequire " + mod + " " + version + "\n\n" + replaces
			src := "package main\n\nimport (\n\t_ \"" + pkg + "\"\n"
			for _, w := range b.with {
				src += "\t_ \"" + w + "\"\n"
			}
			src += ")\n\nfunc main() {}\n"
			write(t, filepath.Join(dir, "go.mod"), gomod)
			write(t, filepath.Join(dir, "main.go"), src)
			goCmd(t, dir, "mod", "tidy")
			all := strings.Fields(goCmd(t, dir, "list", "-m", "-f", "{{.Path}}", "all"))
			graph := goCmd(t, dir, "mod", "graph")
			t.Logf("%s (with %v): %d modules", b.dir, b.with, len(all))
			if len(all) > b.max {
				t.Errorf("importing %s puts %d modules in go list -m all, more than its budget of %d:\n%s", pkg, len(all), b.max, strings.Join(all, "\n"))
			}
			allowed := append(slices.Clone(b.brings), b.tolerated...)
			for _, w := range b.with {
				allowed = append(allowed, chosen[w]...)
			}
			for _, m := range all {
				if !hasPrefix(m, never) || hasPrefix(m, allowed) {
					continue
				}
				// A module the user chose or the module brings may need
				// others of the list (modernc's libc requires x/mod, pgx
				// testify's YAML): AceMQ's go.mod files did not put them
				// there. One an AceMQ module requires, directly or for its
				// tests, is what this test is for.
				by := requirers(graph, m)
				if !slices.ContainsFunc(by, func(r string) bool { return r == rootPath || strings.HasPrefix(r, rootPath+"/") }) {
					continue
				}
				t.Errorf("importing %s puts %s in the module graph (required by %v): a driver, test helper or heavy library its user did not choose", pkg, m, by)
			}
		})
	}
}

const rootPath = "github.com/acemq-go/acemq"

func pathOf(dir string) string {
	if dir == "." {
		return rootPath
	}
	return rootPath + "/" + dir
}

func hasPrefix(m string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(m, p) })
}

// modulesList runs scripts/modules.sh (list, published or version).
func modulesList(t *testing.T, root, what string) []string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "modules.sh"), what)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("scripts/modules.sh %s: %v\n%s", what, err, stderr)
	}
	return strings.Fields(string(out))
}

func currentVersion(t *testing.T, root string) string {
	t.Helper()
	v := modulesList(t, root, "version")
	if len(v) != 1 {
		t.Fatalf("scripts/modules.sh version printed %v", v)
	}
	return v[0]
}

// replaceAll is a replace block mapping every AceMQ module at version to
// its directory in the working tree (what go.work does for development).
func replaceAll(t *testing.T, root, version string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("replace (\n")
	for _, m := range modulesList(t, root, "list") {
		fmt.Fprintf(&b, "\t%s %s => %s\n", pathOf(m), version, filepath.Join(root, m))
	}
	b.WriteString(")\n")
	return b.String()
}

// TestNoGoModHasAPlaceholderAndAllRequireOneVersion reads every go.mod: no
// requirement at the placeholder v0.0.0-00010101000000-000000000000 (no
// proxy serves it, so a user's go get of the module fails), and every
// AceMQ requirement at the one version of the last release
// (scripts/modules.sh version fails when they differ), which go.work
// replaces by the directories.
func TestNoGoModHasAPlaceholderAndAllRequireOneVersion(t *testing.T) {
	root := testenv.RepoRoot(t)
	version := currentVersion(t, root)
	for _, m := range modulesList(t, root, "list") {
		text, err := os.ReadFile(filepath.Join(root, m, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(text), "v0.0.0-00010101000000-000000000000") {
			t.Errorf("%s/go.mod requires a module at the placeholder v0.0.0-00010101000000-000000000000; scripts/modules.sh tidy sets sibling requirements to %s", m, version)
		}
	}
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modulesList(t, root, "list") {
		want := pathOf(m) + " " + version + " => ./" + strings.TrimPrefix(m, ".")
		want = strings.TrimSuffix(want, "/")
		if !strings.Contains(string(work), want) {
			t.Errorf("go.work does not replace %s at %s by its directory (want the line %q); run scripts/modules.sh work", pathOf(m), version, want)
		}
	}
}
