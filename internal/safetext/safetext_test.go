package safetext

import (
	"testing"
	"unicode/utf8"
)

func TestLineEscapesWhatActsOnATerminal(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "order.placed v2", "order.placed v2"},
		{"clear screen", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"osc 52 clipboard", "\x1b]52;c;aGVsbG8=\x07", `\x1b]52;c;aGVsbG8=\x07`},
		{"carriage return", "ok\rforged", `ok\x0dforged`},
		{"newline and tab", "a\nb\tc", `a\x0ab\x09c`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 csi", "a\u009b2Jb", `a\u009b2Jb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"invalid utf-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"unicode kept", "naïve 日本 ✓", "naïve 日本 ✓"},
		{"backslash kept", `C:\path`, `C:\path`},
		{"nul", "a\x00b", `a\x00b`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Line(c.in); got != c.want {
				t.Fatalf("Line(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := LineBytes([]byte(c.in)); got != c.want {
				t.Fatalf("LineBytes(%q) = %q, want %q", c.in, got, c.want)
			}
			if NeedsEscape(c.in) != (c.in != c.want) {
				t.Fatalf("NeedsEscape(%q) = %v", c.in, NeedsEscape(c.in))
			}
		})
	}
}

func TestBlockKeepsLinesAndTabsOnly(t *testing.T) {
	in := "line 1\n\tline 2\r\n\x1b[31mred"
	want := "line 1\n\tline 2\\x0d\n\\x1b[31mred"
	if got := Block(in); got != want {
		t.Fatalf("Block = %q, want %q", got, want)
	}
	if got := BlockBytes([]byte(in)); got != want {
		t.Fatalf("BlockBytes = %q, want %q", got, want)
	}
}

func FuzzLineLeavesNoControlCharacter(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\xff\xfe", "\u009b", "\u202e", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Block(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("output of %q is not valid UTF-8: %q", s, out)
			}
			for _, r := range out {
				if r == '\n' || r == '\t' {
					continue
				}
				if unsafeRune(r, true) {
					t.Fatalf("output of %q still holds %U: %q", s, r, out)
				}
			}
		}
		for _, r := range Line(s) {
			if r == '\n' || r == '\t' {
				t.Fatalf("Line(%q) kept a newline or tab", s)
			}
		}
	})
}
