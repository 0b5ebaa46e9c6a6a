package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/cmd/acemq/internal/idtext"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
)

// What the command prints about a message follows internal/safetext's
// rule: text output shows control characters, bidirectional controls and
// invalid UTF-8 escaped (safetext.Line for one-line values, safetext.Block
// for bodies); JSON output is made terminal-safe by jsonSafe without
// changing what it decodes to; --raw writes a body's exact bytes and is
// refused on a terminal unless given as --raw=force.

// idLine is how text output shows an id a publisher chose (a message's
// id, correlation or causation id): escaped by the safetext rule and, past
// idtext.Max bytes, cut to its first bytes and its length (idtext.Short),
// so that a 60,000-byte x-acemq-id is one short line rather than a
// terminal's worth. JSON output keeps ids whole, for the programs that
// read it.
func idLine(id string) string { return safetext.Line(idtext.Short(id)) }

// jsonSafe rewrites encoding/json's output so that no character the
// safetext rule escapes reaches a terminal raw, and the JSON still decodes
// to the same values: DEL, C1 controls, the bidirectional controls and the
// line separators become \uXXXX escapes (encoding/json already escapes C0
// controls and turns invalid UTF-8 into U+FFFD). b must be JSON as
// encoding/json writes it: outside strings only ASCII appears, so every
// rewritten character is inside a string, where \uXXXX means the same.
func jsonSafe(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf && c != 0x7f {
			i++
			continue
		}
		r, size := rune(c), 1
		if c >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(b[i:])
		}
		bad := r == utf8.RuneError && size <= 1
		if !bad && !safetext.NeedsEscape(string(r)) {
			i += size
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+16)
		}
		out = append(out, b[last:i]...)
		if bad {
			r = utf8.RuneError
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		i += size
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// writeJSONLine writes v as one JSON line, made terminal-safe by jsonSafe.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}

// rawOutput is the value of --raw: off, on (refused when stdout is a
// terminal) or force (written to a terminal too).
type rawOutput string

const (
	rawOff   rawOutput = ""
	rawOn    rawOutput = "true"
	rawForce rawOutput = "force"
)

func (r *rawOutput) String() string {
	if *r == rawOff {
		return "false"
	}
	return string(*r)
}

func (r *rawOutput) Set(s string) error {
	switch strings.ToLower(s) {
	case "true", "1":
		*r = rawOn
	case "false", "0":
		*r = rawOff
	case "force":
		*r = rawForce
	default:
		return fmt.Errorf("--raw=%s is not known; write --raw (refused when stdout is a terminal) or --raw=force", safetext.Line(s))
	}
	return nil
}

// Type is "bool" so the help shows a plain --raw, as for a switch.
func (r *rawOutput) Type() string { return "bool" }

// rawFlag registers --raw; what says what the exact bytes are.
func rawFlag(cmd *cobra.Command, r *rawOutput, what string) {
	f := cmd.Flags().VarPF(r, "raw", "", what+" byte for byte, one newline between two "+
		"(nothing escaped; for a pipe or a file: with -n 1 the output is that one body). "+
		"Refused when stdout is a terminal, since a body can carry terminal control sequences; --raw=force writes to a terminal anyway")
	f.NoOptDefVal = string(rawOn)
}

// errRawToTerminal is why --raw without =force wrote nothing.
var errRawToTerminal = errors.New("--raw writes message bodies byte for byte, and a body can carry terminal control sequences " +
	"(clear the screen, rewrite lines, set the clipboard); stdout is a terminal, so nothing was read or written: " +
	"redirect it to a file or a pipe (… --raw > body.bin), or pass --raw=force to write to the terminal anyway")

// check refuses --raw (without =force) when out is a terminal.
func (r rawOutput) check(out io.Writer) error {
	if r == rawOn && isTTY(out) {
		return errRawToTerminal
	}
	return nil
}

// rawWriter writes bodies byte for byte, one newline between two.
type rawWriter struct {
	w     io.Writer
	wrote bool
}

func (rw *rawWriter) body(b []byte) error {
	if rw.wrote {
		if _, err := rw.w.Write([]byte{'\n'}); err != nil {
			return err
		}
	}
	rw.wrote = true
	_, err := rw.w.Write(b)
	return err
}
