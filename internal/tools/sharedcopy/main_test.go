package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTheCopiesAreCurrent fails while a module's copy of a shared internal
// package differs from its source (or a copy is no longer imported): run
// go run ./internal/tools/sharedcopy.
func TestTheCopiesAreCurrent(t *testing.T) {
	dir, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Want) == 0 {
		t.Fatal("no copies planned: the modules' imports of <module>/internal/... were not found")
	}
	if stale := plan.Stale(); len(stale) > 0 {
		t.Errorf("copies of shared internal packages are stale; run go run ./internal/tools/sharedcopy:\n  %s", strings.Join(stale, "\n  "))
	}
}

// TestAChangedSourceMakesItsCopiesStale edits a source in a scratch copy
// of the plan: Stale must name every module's copy of it.
func TestAChangedSourceMakesItsCopiesStale(t *testing.T) {
	dir, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for f := range plan.Have {
		if filepath.Base(filepath.Dir(f)) == "semconv" {
			plan.Have[f] = append([]byte("// edited\n"), plan.Have[f]...)
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no module holds a copy of semconv (the outbox does)")
	}
	stale := plan.Stale()
	if len(stale) != changed {
		t.Errorf("%d copies of semconv edited, Stale names %d:\n%s", changed, len(stale), strings.Join(stale, "\n"))
	}
	plan.Have[filepath.Join(dir, "nowhere", "internal", "x", "x.go")] = []byte(marker)
	if got := plan.Stale(); len(got) != changed+1 {
		t.Errorf("a generated file no module imports is not reported: %v", got)
	}
}
