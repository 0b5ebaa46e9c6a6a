package idtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShortKeepsShortIDsAndCutsLongOnes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"0193a5c0-7f3e-7cc1-9d2f-6b1e1c9a4f00", "0193a5c0-7f3e-7cc1-9d2f-6b1e1c9a4f00"},
		{strings.Repeat("a", Max), strings.Repeat("a", Max)},
		{strings.Repeat("a", Max+1), strings.Repeat("a", Max) + "… (65 bytes)"},
		{strings.Repeat("x", 60000), strings.Repeat("x", Max) + "… (60000 bytes)"},
		// A character across the cut is left out whole, not split.
		{strings.Repeat("a", Max-1) + "é" + strings.Repeat("b", 10), strings.Repeat("a", Max-1) + "… (75 bytes)"},
	} {
		got := Short(tc.in)
		if got != tc.want {
			t.Errorf("Short(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Short(%d bytes) is not valid UTF-8", len(tc.in))
		}
	}
}

func TestQuoteEscapesWhatIsNotUTF8AndCutsLongOnes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{"a\xffb", `"a\xffb"`},
		{strings.Repeat("\xff", 100), `"` + strings.Repeat(`\xff`, Max) + `"… (100 bytes)`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
