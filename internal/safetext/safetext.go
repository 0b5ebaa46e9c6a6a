// Package safetext is AceMQ's one rule for showing message content to a
// person: on a terminal (the acemq command) and in the console's pages.
//
// Whoever can publish to a queue chooses a message's type, headers and body.
// Printed as is, bytes such as ESC [ 2 J (clear the screen), an OSC 52
// clipboard write, a carriage return that overwrites a line, or a
// right-to-left override that reorders what is read would act on the
// operator's terminal or mislead the reader. The rule:
//
//   - C0 controls (U+0000-U+001F), DEL (U+007F) and C1 controls
//     (U+0080-U+009F) are shown escaped: \x1b, \x7f, \u009b. Line keeps
//     none of them; Block keeps newline and tab, so a multi-line body still
//     reads as lines.
//   - Unicode's format characters (category Cf), which change how text
//     reads without showing anything: the bidirectional controls (U+061C,
//     U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), the zero-width space,
//     joiners and word joiner (U+200B-U+200D, U+2060), the byte order mark
//     (U+FEFF), the soft hyphen (U+00AD), the tag characters and the rest;
//     and the line and paragraph separators (U+2028, U+2029): shown
//     escaped as \u202e, \u200b and so on (\U000e0041 beyond U+FFFF).
//   - A byte that is not part of valid UTF-8 is shown as \xNN.
//
// Every other character, a backslash included, is shown as it is: the
// escapes are for the eye, not a reversible encoding. A tool that needs the
// exact bytes asks for raw output (the acemq command's --raw flag) and
// sends it to a pipe or file rather than a terminal.
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Line returns s with every character the rule escapes escaped, newline and
// tab included: for values shown on one line (a type, a header, a reason).
func Line(s string) string { return escape(s, false) }

// Block returns s escaped as Line does, except that newline and tab are
// kept: for bodies shown as text over several lines.
func Block(s string) string { return escape(s, true) }

// LineBytes is Line for a byte slice.
func LineBytes(b []byte) string { return escape(string(b), false) }

// BlockBytes is Block for a byte slice.
func BlockBytes(b []byte) string { return escape(string(b), true) }

// NeedsEscape reports whether Line would change s.
func NeedsEscape(s string) bool { return firstUnsafe(s, false) >= 0 }

func escape(s string, keepLines bool) string {
	i := firstUnsafe(s, keepLines)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			writeByteEscape(&b, s[i])
		case unsafeRune(r, keepLines):
			writeRuneEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte that needs escaping, or
// -1. ASCII printable text, the common case, is checked a byte at a time.
func firstUnsafe(s string, keepLines bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f || keepLines && (c == '\n' || c == '\t') {
				i++
				continue
			}
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || unsafeRune(r, keepLines) {
			return i
		}
		i += size
	}
	return -1
}

func unsafeRune(r rune, keepLines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !keepLines
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Segments calls fn for each piece of s in order, as Line shows it: a run
// of characters shown as they are (escaped false), or one character or
// invalid byte that Line escapes (escaped true, text its escape). A page
// that marks escapes (so that an escaped U+202E does not read like the six
// characters \u202e typed into a name) renders the pieces apart.
func Segments(s string, fn func(text string, escaped bool)) {
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		bad := r == utf8.RuneError && size <= 1
		if !bad && !unsafeRune(r, false) {
			i += size
			continue
		}
		if start < i {
			fn(s[start:i], false)
		}
		var b strings.Builder
		if bad {
			writeByteEscape(&b, s[i])
		} else {
			writeRuneEscape(&b, r)
		}
		fn(b.String(), true)
		i += size
		start = i
	}
	if start < len(s) {
		fn(s[start:], false)
	}
}

func writeByteEscape(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

func writeRuneEscape(b *strings.Builder, r rune) {
	if r < 0x80 {
		writeByteEscape(b, byte(r))
		return
	}
	top := 12
	if r > 0xffff {
		b.WriteString(`\U`)
		top = 28
	} else {
		b.WriteString(`\u`)
	}
	for shift := top; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>uint(shift))&0xf])
	}
}
