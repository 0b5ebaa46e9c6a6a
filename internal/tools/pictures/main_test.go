package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestThePicturesAreCurrent draws every docs/pictures/*.pic again and
// compares it with the committed .svg: a source changed without its
// picture (or a picture edited by hand) fails here.
func TestThePicturesAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "docs", "pictures")
	stale, err := Run(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("these pictures differ from their source; run go run ./internal/tools/pictures and look at them:\n  %s", strings.Join(stale, "\n  "))
	}
}

// Every picture is shown by some page of the manual.
func TestEveryPictureIsOnAPage(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	svgs, err := filepath.Glob(filepath.Join(root, "docs", "pictures", "*.svg"))
	if err != nil || len(svgs) == 0 {
		t.Fatalf("no picture in docs/pictures (%v)", err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	var all strings.Builder
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, s := range svgs {
		if !strings.Contains(all.String(), "pictures/"+filepath.Base(s)) {
			t.Errorf("%s is shown on no page of docs/ or the README", filepath.Base(s))
		}
	}
}

func TestAPictureDependsOnItsSourceAlone(t *testing.T) {
	src := `picture 200 100 "two boxes"
box a 10 10 60 40 "a"
box b 120 10 110 40 queue "b" "two lines"
arrow a b label "goes to" # a comment
text 10 90 "note" small`
	p1, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := Parse(src)
	if string(p1.SVG()) != string(p2.SVG()) {
		t.Fatal("the same source drew two different pictures")
	}
	svg := string(p1.SVG())
	for _, want := range []string{`<title>two boxes</title>`, `>goes to</text>`, `M70,30 L120,30`} {
		if !strings.Contains(svg, want) {
			t.Errorf("the picture lacks %q:\n%s", want, svg)
		}
	}
}

func TestASourceMistakeNamesItsLine(t *testing.T) {
	for src, want := range map[string]string{
		"picture 10 10 \"t\"\nbox a 1 2 40 30 \"a\"\narrow a nope":          "3: no box \"nope\"",
		"picture 10 10 \"t\"\nbox a 1 2 40 30 blob \"a\"":                   "2: no box kind \"blob\"",
		"picture 10 10 \"t\"\nbox a 1 2 x 30 \"a\"":                         "2: \"x\" is not a number",
		"box a 1 2 40 30 \"a\"":                                             "no picture W H",
		"picture 10 10 \"t\"\ntext 1 2 \"never closed":                      "2: a quote is never closed",
		"picture 10 10 \"t\"\nbox a 1 2 40 30 \"a\"\narrow a a.q":           "3: a.q: a side is n, s, e or w",
		"picture 10 10 \"t\"\nbox a 1 2 40 30 \"a\"\narrow a a.n@2":         "3: a.n@2: the point along a side is 0 to 1",
		"picture 10 10 \"t\"\nbox a 1 2 40 30 \"a\"\nbox a 1 2 40 30 \"b\"": "3: box a is declared twice",
		// Text that would run over a border (as the outbox picture's note did).
		"picture 10 10 \"t\"\nbox a 1 2 100 30 \"a line too long for it\"":          "2: box a: line \"a line too long for it\" is about",
		"picture 10 10 \"t\"\nbox a 1 2 140 30 queue \"a\" \"two lines\" \"three\"": "2: box a: 3 lines need about",
	} {
		_, err := Parse(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", src, err, want)
		}
	}
}
