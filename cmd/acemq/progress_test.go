package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressWritesPlainLinesWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "moving", 3)
	p.Add(1)
	p.Add(2)
	p.Done()
	p.Done()
	out := buf.String()
	if strings.Contains(out, "\r") || strings.Count(out, "moving: 3/3") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress on a non-terminal: %q", out)
	}
}
