// Command testfilter reads `go test -json` on stdin and prints what plain
// `go test` would: the output of failing tests and the per-package
// ok/FAIL lines. It also fails (exit 1) when a test was skipped with a
// message naming an ACEMQ_TEST_ variable, i.e. skipped because a service
// such as RabbitMQ or PostgreSQL was missing, so `make test` cannot pass
// while a broker test silently did not run.
//
// go test's own exit status is not seen here; the Makefile runs the pipe
// under `set -o pipefail` so that a failing go test fails the target.
//
// -label TEXT ends the closing line with " on TEXT" (`make test` names the
// RabbitMQ version a pass ran: "tests: 1,462 passed, … on RabbitMQ 4.3.6").
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	// ImportPath is set on build-output events (Go 1.24+).
	ImportPath string
}

// marker is what a skip message must contain to count as a missing service.
const marker = "ACEMQ_TEST_"

func main() {
	label := flag.String("label", "", "what the tests ran on, for the closing line (RabbitMQ 4.3.6)")
	flag.Parse()
	os.Exit(runOn(os.Stdin, os.Stdout, *label))
}

// runOn filters in to out; label, when not empty, ends the closing line.
func runOn(in io.Reader, out io.Writer, label string) int {
	w := bufio.NewWriter(out)
	defer w.Flush()

	buf := map[string]*strings.Builder{} // package + "\x00" + test → output so far
	var serviceSkips []string
	var passed, failed, skipped int

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			// Not an event (go's own messages on a mixed stream): pass it on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := ev.Package + "\x00" + ev.Test
		switch {
		case ev.Action == "build-output":
			fmt.Fprint(w, ev.Output)
		case ev.Test == "" && ev.Action == "output":
			// Package-level lines: "ok  pkg 0.1s", "FAIL pkg", "--- FAIL" of
			// a crashed binary, panics outside tests. Drop the bare PASS.
			if ev.Output != "PASS\n" {
				fmt.Fprint(w, ev.Output)
			}
		case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			// Package done: print anything from tests that never finished
			// (a panic or timeout kills the binary mid-test).
			prefix := ev.Package + "\x00"
			for k, b := range buf {
				if strings.HasPrefix(k, prefix) {
					fmt.Fprint(w, b.String())
					delete(buf, k)
				}
			}
		case ev.Action == "output":
			if isFramingLine(ev.Output) {
				continue
			}
			b := buf[key]
			if b == nil {
				b = &strings.Builder{}
				buf[key] = b
			}
			b.WriteString(ev.Output)
		case ev.Action == "fail":
			failed++
			if b := buf[key]; b != nil {
				fmt.Fprint(w, b.String())
			}
			delete(buf, key)
		case ev.Action == "skip":
			skipped++
			if b := buf[key]; b != nil && strings.Contains(b.String(), marker) {
				serviceSkips = append(serviceSkips, ev.Package+" "+ev.Test)
				fmt.Fprint(w, b.String())
			}
			delete(buf, key)
		case ev.Action == "pass":
			passed++
			delete(buf, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testfilter: reading go test output: %v\n", err)
		return 1
	}
	// The plain closing line CI and people read: every test counted once.
	on := ""
	if label != "" {
		on = " on " + label
	}
	defer func() { fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped%s\n", passed, failed, skipped, on) }()
	if len(serviceSkips) > 0 {
		fmt.Fprintf(w, "\nFAIL: %d test(s) skipped because a service was missing (their skip message names an %s variable):\n", len(serviceSkips), marker)
		for _, s := range serviceSkips {
			fmt.Fprintf(w, "    %s\n", s)
		}
		fmt.Fprintf(w, "make test starts RabbitMQ and PostgreSQL with scripts/ and sets those variables; see the skip messages above.\n")
		return 1
	}
	return 0
}

// isFramingLine reports the -v lines that plain go test does not print.
func isFramingLine(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
