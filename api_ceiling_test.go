package acemq_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// exportedCeiling is the most identifiers the root package may export:
// every top-level name (each constant, variable, type and function) plus
// every exported method of an exported type. A new name has to be worth one
// that goes, or the ceiling moves in the commit that adds it, with the names
// and the reason written here.
//
// 215: issue 15's target, held until RabbitMQ 4.3's delayed retry (issue
// 38), which added 10: RetryWaits, WaitsOnRungs, WaitsInQueue,
// WaitsInQueueWhereSupported, RetryWaits.String, RetryPolicy.HoldWaits,
// Linear (the broker's own growth), PlanRetry, PlanRetry.String (the plan's
// word on where each queue's waits are held) and Conn.Broker (the version
// those choices are made from). A choice with three answers needs its
// type; a plan a person reads needs its line.
const exportedCeiling = 225

func TestTheRootPackageExportsAtMostTheCeiling(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			names = append(names, exportedIn(d)...)
		}
	}
	if len(names) > exportedCeiling {
		t.Fatalf("the root package exports %d identifiers, over the ceiling of %d: %s", len(names), exportedCeiling, strings.Join(names, ", "))
	}
	t.Logf("%d exported identifiers (ceiling %d)", len(names), exportedCeiling)
}

// exportedIn lists the exported names d declares: top-level names, and
// methods as Type.Method when their receiver type is exported.
func exportedIn(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		typ := d.Recv.List[0].Type
		if s, ok := typ.(*ast.StarExpr); ok {
			typ = s.X
		}
		switch x := typ.(type) {
		case *ast.IndexExpr:
			typ = x.X
		case *ast.IndexListExpr:
			typ = x.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			out = append(out, id.Name+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
