package modgraph_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/testenv"
)

// TestNoModuleImportsAnotherModulesInternals parses every Go file of every
// module, tests included: an import of an internal/ package must stay
// inside its module. The go command allows github.com/acemq-go/acemq/outbox
// to import github.com/acemq-go/acemq/internal/x (the path rule), but
// minimal version selection can pair outbox vN with the root at vN+1,
// whose internals are free to change: a user's build breaks. A module that
// needs a shared helper gets a copy (go run ./internal/tools/sharedcopy);
// a seam two modules share is public API of the module that owns it.
func TestNoModuleImportsAnotherModulesInternals(t *testing.T) {
	root := testenv.RepoRoot(t)
	mods := modulesList(t, root, "list")
	owner := func(path string) string { // the module holding an import path
		best := ""
		for _, m := range mods {
			p := pathOf(m)
			if (path == p || strings.HasPrefix(path, p+"/")) && len(p) > len(best) {
				best = p
			}
		}
		return best
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		mine := owner(pathOf(filepath.ToSlash(rel)))
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, s := range f.Imports {
			imp, _ := strconv.Unquote(s.Path.Value)
			if !strings.HasPrefix(imp, rootPath) || !(strings.Contains(imp, "/internal/") || strings.HasSuffix(imp, "/internal")) {
				continue
			}
			if theirs := owner(imp); theirs != mine {
				name, _ := filepath.Rel(root, path)
				t.Errorf("%s (module %s) imports %s, an internal package of module %s; import the module's own copy (%s/internal/..., written by go run ./internal/tools/sharedcopy) or a public API", name, mine, imp, theirs, mine)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files under %s; the walk missed the repository", files, root)
	}
}
