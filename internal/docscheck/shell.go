package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Command is one simple command from a shell block or an inline code span.
type Command struct {
	File  string
	Line  int
	Dir   string   // the directory it runs in, relative to the root (after any cd)
	Words []string // the words, quotes removed
}

func (c Command) String() string {
	return fmt.Sprintf("%s:%d: %s", c.File, c.Line, strings.Join(c.Words, " "))
}

// ShellCommands splits a shell block into simple commands (at ;, &&, ||,
// | and &), dropping comments, and follows cd so that each command knows
// its directory.
func ShellCommands(b Block) []Command {
	var out []Command
	dir := "."
	for i, line := range b.Lines {
		for _, words := range splitShell(line) {
			c := Command{File: b.File, Line: b.Line + 1 + i, Dir: dir, Words: words}
			out = append(out, c)
			if words[0] == "cd" && len(words) > 1 {
				dir = filepath.Join(dir, words[1])
			}
		}
	}
	return out
}

// splitShell returns the simple commands of one line of shell.
func splitShell(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	flushWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	flushCmd := func() {
		flushWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == '#' && !inWord:
			flushCmd()
			return cmds
		case r == ';' || r == '|' || r == '&':
			flushCmd()
		case unicode.IsSpace(r):
			flushWord()
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	flushCmd()
	return cmds
}

var inlineCommandRE = regexp.MustCompile("`((?:make|acemq|cd|go (?:run|test|build|vet|install)) [^`]*)`")

// InlineCommands returns the commands written as inline code spans
// outside code blocks that start with make, acemq, cd or go run, test,
// build, vet or install (the spans that name a target, a directory or a
// subcommand). A span's cd carries to the commands after it in the span.
func InlineCommands(path string) ([]Command, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var out []Command
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if in {
			continue
		}
		for _, m := range inlineCommandRE.FindAllStringSubmatch(l, -1) {
			dir := "."
			for _, words := range splitShell(strings.ReplaceAll(m[1], `\|`, "|")) {
				out = append(out, Command{File: path, Line: i + 1, Dir: dir, Words: words})
				if words[0] == "cd" && len(words) > 1 {
					dir = filepath.Join(dir, words[1])
				}
			}
		}
	}
	return out, nil
}

// MakeTargets returns the targets the Makefile at path defines, with
// $(addprefix P,$(VAR)) expanded.
func MakeTargets(path string) (map[string]bool, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	vars := map[string][]string{}
	assign := regexp.MustCompile(`^([A-Z_]+)\s*[:?]?=\s*(.*)$`)
	for _, l := range lines {
		if m := assign.FindStringSubmatch(l); m != nil {
			vars[m[1]] = strings.Fields(m[2])
		}
	}
	addprefix := regexp.MustCompile(`\$\(addprefix ([^,]+),\$\(([A-Z_]+)\)\)`)
	rule := regexp.MustCompile(`^([^\s:=#\t][^:=]*):([^=]|$)`)
	targets := map[string]bool{}
	for _, l := range lines {
		m := rule.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		names := addprefix.ReplaceAllStringFunc(m[1], func(s string) string {
			sm := addprefix.FindStringSubmatch(s)
			var out []string
			for _, v := range vars[sm[2]] {
				out = append(out, sm[1]+v)
			}
			return strings.Join(out, " ")
		})
		for _, n := range strings.Fields(names) {
			if !strings.HasPrefix(n, ".") && !strings.Contains(n, "%") {
				targets[n] = true
			}
		}
	}
	return targets, nil
}

// placeholder reports whether a word stands for something the reader
// fills in (NAME, Q, drill-NAME, …), which the checks cannot resolve.
func placeholder(w string) bool {
	return strings.ContainsAny(w, "…<>") || (strings.ToLower(w) != w && !strings.HasPrefix(w, "-"))
}

// CheckCommand checks one command against the repository at root: make
// targets exist, the directories of cd and of go's package arguments
// exist, scripts exist. For an acemq command (acemq ... or go run
// ./cmd/acemq ...) it returns the arguments after the program name, for
// the caller that knows the command tree.
func CheckCommand(root string, targets map[string]bool, c Command) (acemqArgs []string, isAcemq bool, err error) {
	w := c.Words
	for len(w) > 0 && strings.Contains(w[0], "=") && !strings.HasPrefix(w[0], "-") {
		w = w[1:] // VAR=value prefixes
	}
	if len(w) == 0 {
		return nil, false, nil
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, c.Dir, p))
		return err == nil
	}
	switch {
	case w[0] == "cd":
		if len(w) > 1 && !exists(w[1]) {
			return nil, false, fmt.Errorf("%s: cd into %s, which does not exist", c, w[1])
		}
	case w[0] == "make":
		for _, a := range w[1:] {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue
			}
			if placeholder(a) {
				prefix := strings.TrimRightFunc(a, func(r rune) bool { return unicode.IsUpper(r) || r == '…' })
				found := false
				for t := range targets {
					if strings.HasPrefix(t, prefix) {
						found = true
					}
				}
				if !found {
					return nil, false, fmt.Errorf("%s: no make target starts with %q", c, prefix)
				}
				continue
			}
			if !targets[a] {
				return nil, false, fmt.Errorf("%s: the Makefile has no target %q", c, a)
			}
		}
	case w[0] == "acemq":
		return w[1:], true, nil
	case w[0] == "go" && len(w) > 1:
		for i, a := range w[2:] {
			if !strings.HasPrefix(a, "./") && a != "." {
				continue
			}
			p := strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/")
			if p == "" {
				p = "."
			}
			if !exists(p) {
				return nil, false, fmt.Errorf("%s: %s does not exist", c, a)
			}
			if w[1] == "run" && filepath.Clean(filepath.Join(c.Dir, p)) == filepath.Join("cmd", "acemq") {
				return w[2+i+1:], true, nil
			}
			if w[1] == "run" {
				// What follows is the program's own arguments: its flags
				// must be ones it defines.
				dir := filepath.Join(root, c.Dir, p)
				flags, err := ProgramFlags(dir)
				if err != nil {
					return nil, false, fmt.Errorf("%s: %v", c, err)
				}
				for _, f := range w[2+i+1:] {
					name, ok := flagName(f)
					if ok && !flags[name] {
						return nil, false, fmt.Errorf("%s: the program in %s defines no flag -%s", c, a, name)
					}
				}
				break
			}
		}
	case strings.HasPrefix(w[0], "scripts/") || strings.HasPrefix(w[0], "./"):
		if !exists(w[0]) {
			return nil, false, fmt.Errorf("%s: %s does not exist", c, w[0])
		}
	}
	return nil, false, nil
}

// flagDef finds a flag's definition in Go source: flag.String("name", …),
// fs.DurationVar(&v, "name", …) and the like.
var flagDef = regexp.MustCompile(`\.(?:Bool|Int|Int64|Uint|Uint64|String|Float64|Duration|Func|BoolFunc|Var|TextVar|BoolVar|IntVar|Int64Var|UintVar|Uint64Var|StringVar|Float64Var|DurationVar)\((?:[^"()]*,\s*)?"([A-Za-z0-9][A-Za-z0-9._-]*)"`)

// ProgramFlags returns the flags the Go program in dir defines (its
// non-test files), plus h and help, which package flag always accepts.
func ProgramFlags(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	flags := map[string]bool{"h": true, "help": true}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	return flags, nil
}

// flagName returns the flag a program argument names (-name, --name,
// -name=value), or false when the argument is not a flag.
func flagName(arg string) (string, bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" || placeholder(arg) {
		return "", false
	}
	name := strings.TrimLeft(arg, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	if name == "" || strings.IndexFunc(name, unicode.IsDigit) == 0 {
		return "", false // a negative number, not a flag
	}
	return name, true
}
