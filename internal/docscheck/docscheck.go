// Package docscheck reads the project's Markdown (README.md, docs/*.md)
// so tests can hold it to the code: every Go block is the body of an
// Example function that compiles (the `<!-- go: DIR ExampleName -->` line
// before the block names it) or a program under examples/ that `make test`
// builds and runs (`<!-- go: examples/manual/start main.go -->`: a block
// that starts with its package clause is the whole file, any other block
// consecutive lines of it), every shell block names make targets,
// directories and scripts that exist, and every link between pages and
// every #anchor resolves. The tests are in this package; the acemq
// command's subcommands and flags are checked by cmd/acemq's tests, which
// can see its command tree. See docs/contributing.md#testing.
package docscheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File   string   // the Markdown file, as given to Blocks
	Line   int      // 1-based line of the opening fence
	Lang   string   // the fence's info string: go, sh, text, ...
	Marker string   // for go blocks: "DIR ExampleName" from the line above, or ""
	Lines  []string // the block's lines, without the fences
}

// Pages returns the Markdown files the checks cover, relative to root:
// README.md, CHANGELOG.md and every docs/*.md.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md", "CHANGELOG.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, m := range more {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			return nil, err
		}
		pages = append(pages, rel)
	}
	sort.Strings(pages[2:])
	return pages, nil
}

var markerRE = regexp.MustCompile(`^<!--\s*go:\s*(\S+\s+\S+)\s*-->$`)

// Blocks returns the fenced code blocks of the Markdown file at path.
func Blocks(path string) ([]Block, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var out []Block
	var cur *Block
	for i, l := range lines {
		if !strings.HasPrefix(l, "```") {
			if cur != nil {
				cur.Lines = append(cur.Lines, l)
			}
			continue
		}
		if cur != nil {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur = &Block{File: path, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				cur.Marker = m[1]
			}
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the code block is never closed", path, cur.Line)
	}
	return out, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// outsideCode returns the file's lines with fenced blocks blanked and
// inline code spans removed, so links and headings are read from prose
// only. Line numbers are kept.
func outsideCode(path string) ([]string, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
			continue
		}
		lines[i] = inlineCodeRE.ReplaceAllString(l, "")
	}
	return lines, nil
}

var inlineCodeRE = regexp.MustCompile("`[^`]*`")

// Slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func Slug(heading string) string {
	h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		case r > 127 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns the anchors of the headings of the Markdown file at
// path (a repeated heading gets -1, -2, ... as on GitHub).
func Anchors(path string) (map[string]bool, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	in := false
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if in || !strings.HasPrefix(l, "#") {
			continue
		}
		s := Slug(l)
		n := seen[s]
		seen[s] = n + 1
		if n > 0 {
			s = fmt.Sprintf("%s-%d", s, n)
		}
		out[s] = true
	}
	return out, nil
}

// Heading is one Markdown heading outside code.
type Heading struct {
	Line  int
	Level int    // 1 for #, 2 for ##, ...
	Text  string // without the #s
}

// Headings returns the headings of the Markdown file at path, in order.
func Headings(path string) ([]Heading, error) {
	lines, err := outsideCode(path)
	if err != nil {
		return nil, err
	}
	var out []Heading
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		out = append(out, Heading{Line: i + 1, Level: len(l) - len(text), Text: strings.TrimSpace(text)})
	}
	return out, nil
}

// Link is one Markdown link or image outside code.
type Link struct {
	File   string
	Line   int
	Target string
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links returns the links of the Markdown file at path.
func Links(path string) ([]Link, error) {
	lines, err := outsideCode(path)
	if err != nil {
		return nil, err
	}
	var out []Link
	for i, l := range lines {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, Link{File: path, Line: i + 1, Target: m[1]})
		}
	}
	return out, nil
}

// CheckLink reports why a link from a page under root does not resolve,
// or nil. Links to other sites are not followed.
func CheckLink(root string, l Link) error {
	t := l.Target
	if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
		return nil
	}
	file, anchor, _ := strings.Cut(t, "#")
	target := l.File
	if file != "" {
		target = filepath.Join(filepath.Dir(l.File), file)
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("%s:%d: the link %s names %s, which does not exist", rel(root, l.File), l.Line, t, rel(root, target))
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		return fmt.Errorf("%s:%d: the link %s has an #anchor into a file that is not Markdown", rel(root, l.File), l.Line, t)
	}
	anchors, err := Anchors(target)
	if err != nil {
		return err
	}
	if !anchors[anchor] {
		return fmt.Errorf("%s:%d: the link %s names the anchor #%s, which is no heading of %s", rel(root, l.File), l.Line, t, anchor, rel(root, target))
	}
	return nil
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// ExampleBody returns the lines of the body of the function name declared
// in a _test.go file of the directory dir, and the file's name.
func ExampleBody(dir, name string) ([]string, string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, "", err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, "", err
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
				continue
			}
			body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			return strings.Split(string(body), "\n"), f, nil
		}
	}
	return nil, "", fmt.Errorf("no function %s in %s/*_test.go", name, dir)
}

// IsFile reports whether a go block's marker names a file (DIR FILE.go)
// rather than an Example function (DIR ExampleName).
func (b Block) IsFile() bool {
	_, name, _ := strings.Cut(b.Marker, " ")
	return strings.HasSuffix(name, ".go")
}

// IsProgram reports whether a go block is a whole file: its first line
// that is not blank is a package clause.
func (b Block) IsProgram() bool {
	for _, l := range b.Lines {
		if t := strings.TrimSpace(l); t != "" {
			return strings.HasPrefix(t, "package ")
		}
	}
	return false
}

// CheckFileBlock reports why a go block whose marker names a file
// (DIR FILE.go, DIR relative to root) is not that file: a block that
// starts with its package clause must be the whole file, any other block
// consecutive lines of it, white space aside in both. The file must be
// under examples/, whose test builds and runs every program (and a whole
// program must be a package main), so the block compiles and runs.
func CheckFileBlock(root string, b Block) error {
	dir, name, _ := strings.Cut(b.Marker, " ")
	where := fmt.Sprintf("%s:%d", rel(root, b.File), b.Line)
	if dir != "examples" && !strings.HasPrefix(dir, "examples/") {
		return fmt.Errorf("%s: %s/%s is not under examples/, whose test builds and runs every program; put the program there", where, dir, name)
	}
	src, err := os.ReadFile(filepath.Join(root, dir, name))
	if err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	have := Normalize(strings.Split(string(src), "\n"))
	want := Normalize(b.Lines)
	if b.IsProgram() {
		if code := dropComments(have); len(code) == 0 || code[0] != "package main" {
			return fmt.Errorf("%s: %s/%s is not a package main", where, dir, name)
		}
		if !slices.Equal(dropComments(have), dropComments(want)) {
			return fmt.Errorf("%s: the block is not the whole of %s/%s (white space aside); change one to match the other", where, dir, name)
		}
		return nil
	}
	if !Contains(have, want) {
		return fmt.Errorf("%s: the block is not consecutive lines of %s/%s (white space aside); change one to match the other", where, dir, name)
	}
	return nil
}

// dropComments drops the comment lines before the package clause: a page
// may leave out the file's doc comment (the page says it), nothing else.
func dropComments(lines []string) []string {
	for i, l := range lines {
		if strings.HasPrefix(l, "package ") {
			return lines[i:]
		}
	}
	return lines
}

// Normalize drops blank lines and collapses each line's white space, so a
// block matches its Example however gofmt aligned the comments.
func Normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// Contains reports whether want appears in have as consecutive lines.
func Contains(have, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(have); i++ {
		match := true
		for j := range want {
			if have[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
