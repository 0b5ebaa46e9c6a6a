package docscheck_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/docscheck"
	"github.com/acemq-go/acemq/internal/testenv"
)

func pages(t *testing.T) (string, []string) {
	t.Helper()
	root := testenv.RepoRoot(t)
	ps, err := docscheck.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 3 {
		t.Fatalf("found only %v; expected README.md, CHANGELOG.md and docs/*.md", ps)
	}
	return root, ps
}

// TestEveryGoBlockIsTheBodyOfAnExample holds every ```go block of the
// README and docs/ to an Example function: the line above the block names
// it (<!-- go: DIR ExampleName -->) and the block's lines must appear, in
// order and white space aside, in that function's body. The Example is
// compiled by go vet and go test, so the block compiles. A block may name
// a file of a program under examples/ instead (<!-- go: DIR main.go -->):
// it is then the whole file, or consecutive lines of it, and
// examples/examples_test.go builds and runs the program.
func TestEveryGoBlockIsTheBodyOfAnExample(t *testing.T) {
	root, ps := pages(t)
	n := 0
	for _, p := range ps {
		if p == "CHANGELOG.md" {
			continue // history: its snippets show old names on purpose
		}
		blocks, err := docscheck.Blocks(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Lang != "go" {
				continue
			}
			n++
			if b.Marker == "" {
				t.Errorf("%s:%d: a go block without <!-- go: DIR ExampleName --> on the line above; put the code in an Example function and name it there", p, b.Line)
				continue
			}
			if b.IsFile() {
				if err := docscheck.CheckFileBlock(root, b); err != nil {
					t.Error(err)
				}
				continue
			}
			dir, name, _ := strings.Cut(b.Marker, " ")
			if !strings.HasPrefix(name, "Example") {
				t.Errorf("%s:%d: %s is not an Example function", p, b.Line, name)
				continue
			}
			body, file, err := docscheck.ExampleBody(filepath.Join(root, dir), name)
			if err != nil {
				t.Errorf("%s:%d: %v", p, b.Line, err)
				continue
			}
			if !docscheck.Contains(docscheck.Normalize(body), docscheck.Normalize(b.Lines)) {
				rel, _ := filepath.Rel(root, file)
				t.Errorf("%s:%d: the block is not the body of %s in %s (white space aside); change one to match the other", p, b.Line, name, rel)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no go block at all; is the parser broken?")
	}
}

// TestEveryShellBlockNamesWhatExists checks each command of every ```sh
// block, and each inline `make …` span: make targets are in the Makefile;
// cd directories, go's ./package arguments and scripts exist. The acemq
// subcommands and flags are checked by cmd/acemq's TestDocsNameOnlyRealSubcommandsAndFlags.
func TestEveryShellBlockNamesWhatExists(t *testing.T) {
	root, ps := pages(t)
	targets, err := docscheck.MakeTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"test", "lint", "services-up", "drill-cluster", "drill-crash"} {
		if !targets[want] {
			t.Fatalf("MakeTargets missed %q (found %v)", want, targets)
		}
	}
	n := 0
	for _, p := range ps {
		if p == "CHANGELOG.md" {
			continue
		}
		path := filepath.Join(root, p)
		blocks, err := docscheck.Blocks(path)
		if err != nil {
			t.Fatal(err)
		}
		var cmds []docscheck.Command
		for _, b := range blocks {
			switch b.Lang {
			case "sh":
				cmds = append(cmds, docscheck.ShellCommands(b)...)
			case "":
				t.Errorf("%s:%d: a code block without a language; say sh (checked as commands), go (an Example), or text", p, b.Line)
			}
		}
		inline, err := docscheck.InlineCommands(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range append(cmds, inline...) {
			c.File = p
			n++
			if _, _, err := docscheck.CheckCommand(root, targets, c); err != nil {
				t.Error(err)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no command at all; is the parser broken?")
	}
}

// TestEveryLinkBetweenPagesResolves follows every relative link of the
// README, CHANGELOG and docs/: the file must exist and an #anchor must be
// one of the target page's headings.
func TestEveryLinkBetweenPagesResolves(t *testing.T) {
	root, ps := pages(t)
	n := 0
	for _, p := range ps {
		links, err := docscheck.Links(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			n++
			if err := docscheck.CheckLink(root, l); err != nil {
				t.Error(err)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no link at all; is the parser broken?")
	}
}

func TestSlugIsGitHubsAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"## The `acemq` command":                                "the-acemq-command",
		"### Held writes (issue 16, third pass)":                "held-writes-issue-16-third-pass",
		"## The outbox relay: pipeline, liveness":               "the-outbox-relay-pipeline-liveness",
		"### memory:// per-message cost (issue 16: the engine)": "memory-per-message-cost-issue-16-the-engine",
	} {
		if got := docscheck.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShellCommandsSplitAndFollowCd(t *testing.T) {
	b := docscheck.Block{File: "x.md", Line: 1, Lang: "sh", Lines: []string{
		`make services-up; set -a; . .tmp/rabbitmq/env; set +a`,
		`cd bench && go run ./outbox -url "$X"   # a comment`,
	}}
	var got [][]string
	var dirs []string
	for _, c := range docscheck.ShellCommands(b) {
		got = append(got, c.Words)
		dirs = append(dirs, c.Dir)
	}
	want := [][]string{{"make", "services-up"}, {"set", "-a"}, {".", ".tmp/rabbitmq/env"}, {"set", "+a"}, {"cd", "bench"}, {"go", "run", "./outbox", "-url", "$X"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("commands = %q, want %q", got, want)
	}
	if dirs[5] != "bench" {
		t.Errorf("the go run after cd bench runs in %q, want bench", dirs[5])
	}
}

// A go run program's flags are checked against the flags it defines.
func TestAGoRunProgramsFlagsMustExist(t *testing.T) {
	root, _ := pages(t)
	check := func(dir string, words ...string) error {
		_, _, err := docscheck.CheckCommand(root, nil, docscheck.Command{File: "x.md", Line: 1, Dir: dir, Words: words})
		return err
	}
	if err := check("bench", "go", "run", ".", "-url", "$X", "-sizes", "256", "-repeat=3", "-n-wait", "200"); err != nil {
		t.Errorf("flags the bench defines: %v", err)
	}
	err := check("bench", "go", "run", ".", "-url", "$X", "-sizez", "256")
	if err == nil || !strings.Contains(err.Error(), "defines no flag -sizez") {
		t.Errorf("a misspelt flag: %v", err)
	}
	if err := check(".", "go", "run", "./bench/outbox", "-nope"); err == nil {
		t.Error("a flag ./bench/outbox does not define was accepted")
	}
}

// TestEveryManualProgramIsShownWhole: each program under examples/manual/
// exists to be read, so some page shows it whole, the way a user copies it
// (scripts/newcomer.sh builds and runs what the page shows).
func TestEveryManualProgramIsShownWhole(t *testing.T) {
	root, ps := pages(t)
	programs, err := filepath.Glob(filepath.Join(root, "examples", "manual", "*", "main.go"))
	if err != nil || len(programs) == 0 {
		t.Fatalf("no program under examples/manual (%v)", err)
	}
	shown := map[string]bool{}
	for _, p := range ps {
		blocks, err := docscheck.Blocks(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Lang == "go" && b.IsFile() && b.IsProgram() {
				dir, name, _ := strings.Cut(b.Marker, " ")
				shown[filepath.Join(root, dir, name)] = true
			}
		}
	}
	for _, prog := range programs {
		if !shown[prog] {
			rel, _ := filepath.Rel(root, prog)
			t.Errorf("%s is shown whole on no page; show it (<!-- go: %s main.go --> above a go block) or remove it", rel, filepath.Dir(rel))
		}
	}
}

// TestTheFirstGoBlockIsAWholeProgram: the README's first go block and
// getting-started's are complete programs, which compile and run as pasted.
func TestTheFirstGoBlockIsAWholeProgram(t *testing.T) {
	root, _ := pages(t)
	for _, p := range []string{"README.md", "docs/getting-started.md"} {
		blocks, err := docscheck.Blocks(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range blocks {
			if b.Lang != "go" {
				continue
			}
			found = true
			if !b.IsFile() || !b.IsProgram() {
				t.Errorf("%s:%d: the page's first go block is not a whole program (<!-- go: examples/manual/NAME main.go --> and the file from its package clause)", p, b.Line)
			}
			break
		}
		if !found {
			t.Errorf("%s has no go block; it should open with a whole program", p)
		}
	}
}

// TestNoPageRepeatsItsTitle: a page's first line is its title, and no
// heading under it says the same again ("# Patterns" then "## Patterns").
func TestNoPageRepeatsItsTitle(t *testing.T) {
	root, ps := pages(t)
	for _, p := range ps {
		if p == "CHANGELOG.md" {
			continue
		}
		path := filepath.Join(root, p)
		blocks, err := docscheck.Headings(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 || blocks[0].Level != 1 {
			t.Errorf("%s does not open with its title (a # heading)", p)
			continue
		}
		title := docscheck.Slug(blocks[0].Text)
		for _, h := range blocks[1:] {
			if docscheck.Slug(h.Text) == title {
				t.Errorf("%s:%d: the heading %q repeats the page's title", p, h.Line, h.Text)
			}
		}
	}
}

// A block naming a file is the whole file (from its package clause) or
// consecutive lines of it, and only a program under examples/ counts.
func TestAFileBlockIsTheFileOrConsecutiveLinesOfIt(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"examples/manual/hello", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := "// Command hello says hello.\npackage main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"
	for _, f := range []string{"examples/manual/hello/main.go", "other/main.go"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	block := func(marker string, lines ...string) docscheck.Block {
		return docscheck.Block{File: filepath.Join(root, "docs", "x.md"), Line: 3, Lang: "go", Marker: marker, Lines: lines}
	}
	for _, c := range []struct {
		b    docscheck.Block
		want string // "" for no error
	}{
		{block("examples/manual/hello main.go", "package main", "", "import \"fmt\"", "func main() {", "    fmt.Println(\"hello\")", "}"), ""},
		{block("examples/manual/hello main.go", "func main() {", "\tfmt.Println(\"hello\")"), ""},
		{block("examples/manual/hello main.go", "package main", "func main() {}"), "is not the whole of"},
		{block("examples/manual/hello main.go", "fmt.Println(\"bye\")"), "is not consecutive lines of"},
		{block("other main.go", "package main"), "is not under examples/"},
		{block("examples/manual/nope main.go", "package main"), "no such file"},
	} {
		if !c.b.IsFile() {
			t.Fatalf("%q is not read as a file block", c.b.Marker)
		}
		err := docscheck.CheckFileBlock(root, c.b)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q %q: %v, want no error", c.b.Marker, c.b.Lines, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q %q: %v, want an error saying %q", c.b.Marker, c.b.Lines, err, c.want)
		}
	}
}
