package main

import "testing"

// TestTheExampleRuns runs the example on the in-process broker, so a
// change that breaks it fails `make test`.
func TestTheExampleRuns(t *testing.T) {
	if err := run("memory://example-codecs-test"); err != nil {
		t.Fatal(err)
	}
}
