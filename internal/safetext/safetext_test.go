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

// Zero-width and other format characters show nothing and change how
// text reads, so they are escaped like the bidi controls: an id
// "weird-1<U+200B>" must not look like "weird-1". Segments tells an
// escape from the same characters typed.
func TestFormatCharactersAreEscapedAndSegmentsMarkThem(t *testing.T) {
	for in, want := range map[string]string{
		"weird-1\u200b":   `weird-1\u200b`,
		"a\u200db\u2060c": `a\u200db\u2060c`,
		"\ufeffbom\u00ad": `\ufeffbom\u00ad`,
		"tag\U000E0041":   `tag\U000e0041`,
		"shop.\u202egpj":  `shop.\u202egpj`,
		`shop.\u202egpj`:  `shop.\u202egpj`,
		"plain é 日本 ok 👍": "plain é 日本 ok 👍",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	type seg struct {
		text string
		esc  bool
	}
	var got []seg
	Segments("shop.\u202egpj\xff.dlq", func(text string, esc bool) { got = append(got, seg{text, esc}) })
	want := []seg{{"shop.", false}, {`\u202e`, true}, {"gpj", false}, {`\xff`, true}, {".dlq", false}}
	if len(got) != len(want) {
		t.Fatalf("Segments: %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Segments: %v, want %v", got, want)
		}
	}
	got = nil
	Segments(`shop.\u202egpj`, func(text string, esc bool) { got = append(got, seg{text, esc}) })
	if len(got) != 1 || got[0].esc {
		t.Fatalf("a name spelled with a backslash is marked as an escape: %v", got)
	}
}
