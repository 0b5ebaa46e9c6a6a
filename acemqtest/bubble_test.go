package acemqtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/testenv"
)

// notRunInAService are the directories (by name, at any depth) a
// service's test never runs in a bubble: the command, the tools, the
// examples' programs, the benchmarks, the console, the drills and the
// test helpers.
var notRunInAService = []string{"cmd", "bench", "console", "examples", "dashboards", "scripts", "testdata",
	"testenv", "brokertest", "dbtest", "drill", "docscheck", "modgraph", "tools", "alarmtest", "codectest", "orderpb"}

// crossesBubbles are the package-level variables of library code a
// harness runs that hold something reusable across tests, each with why it
// cannot carry a bubble's channel, timer or goroutine from one test into
// the next. A new one must say so here.
var crossesBubbles = map[string]string{
	"batch.go onePool":                       "pools a batch of one: a prepared message and an error, no channel or timer; putOne zeroes it (its context included)",
	"telemetry.go spanAttrsPool":             "pools arrays of span attributes: plain values",
	"codec.go codecRegistry":                 "the codec registry (one of the two global registries): codecs, no channels",
	"envelope.go lastMillis":                 "caches the last millisecond rendered: a number and its text",
	"backoff.go backoffDraw":                 "a test hook for jitter draws: a function, nil in use",
	"transport/transport.go registryMu":      "guards the scheme registry (one of the two global registries): drivers, no channels",
	"transport/transport.go registry":        "the scheme registry: drivers, registered at init",
	"transport/memory/registry.go brokersMu": "guards the broker registry; a harness's broker is its own (a unique name, deleted when its test ends)",
	"transport/memory/registry.go brokers":   "the memory:// registry; a harness's broker is its own (a unique name, deleted when its test ends)",
	"acemqtest/harness.go harnesses":         "counts harnesses, for their brokers' unique names",
	"codec/yaml/yaml.go coreTags":            "a table of YAML tags, only read",
	"replay/filter.go filterFields":          "a table of the filter's field names, only read",
}

// TestNoLibraryStateCrossesBubbles reads every package-level variable and
// init function of the library code a service runs under the harness. A
// synctest bubble owns the channels, timers and goroutines made in it; one
// that outlives its test in a package variable (a sync.Pool of objects
// holding a timer, a lazily started worker) reaches the next test's
// bubble, where using it is a fatal error or, worse, a wait on a clock
// that is not the bubble's. (A package-wide pool of publish batches did
// exactly that.) A pool, channel, timer, mutex-guarded cache or lazily
// built global must be listed in crossesBubbles with the reason it holds
// nothing of a bubble; an init function may not start a goroutine.
func TestNoLibraryStateCrossesBubbles(t *testing.T) {
	root := testenv.RepoRoot(t)
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || slices.Contains(notRunInAService, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" && startsGoroutine(d.Body) {
					t.Errorf("%s: init starts a goroutine, which would run outside every test's bubble; start it from a constructor its owner closes", rel)
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if name.Name == "_" || !holdsState(vs, i) {
							continue
						}
						key := filepath.ToSlash(rel) + " " + name.Name
						found = append(found, key)
						if _, ok := crossesBubbles[key]; !ok {
							t.Errorf("%s: the package variable %s holds state shared by every test (a pool, a channel, a timer, a cache, something synchronised); a harness runs each test in a bubble of its own, and a channel or timer made in one must never reach another. Make it a field of what owns it, or list it in crossesBubbles with the reason it holds nothing of a bubble", rel, name.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range crossesBubbles {
		if !slices.Contains(found, key) {
			t.Errorf("crossesBubbles lists %s, which no longer exists; drop it", key)
		}
	}
}

// holdsState reports whether the i-th variable of vs is of a kind that can
// carry something from one test to the next: not a constant-like value
// (an error, a string table, a regexp), but a pool, a channel, a timer,
// something synchronised or atomic, or a map or pointer filled at run time.
func holdsState(vs *ast.ValueSpec, i int) bool {
	var expr ast.Node = vs.Type
	if expr == nil && i < len(vs.Values) {
		expr = vs.Values[i]
	}
	if expr == nil {
		return false
	}
	stateful := false
	ast.Inspect(expr, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ChanType:
			stateful = true
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				switch id.Name + "." + x.Sel.Name {
				case "sync.Pool", "sync.Mutex", "sync.RWMutex", "sync.Once", "sync.WaitGroup", "sync.Cond", "sync.Map",
					"time.NewTimer", "time.NewTicker", "time.AfterFunc", "time.Timer", "time.Ticker":
					stateful = true
				}
				if id.Name == "atomic" {
					stateful = true
				}
			}
		case *ast.StructType:
			// An anonymous struct (a registry with its mutex): look inside.
		}
		return !stateful
	})
	if stateful {
		return true
	}
	// A map is state when it is filled at run time (a registry), a table
	// when it is only read: either way it is listed, with which it is.
	switch x := expr.(type) {
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "make" {
			return true
		}
	case *ast.CompositeLit:
		_, isMap := x.Type.(*ast.MapType)
		return isMap
	case *ast.MapType:
		return true
	}
	return false
}

func startsGoroutine(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if _, ok := n.(*ast.GoStmt); ok {
			found = true
		}
		return !found
	})
	return found
}
