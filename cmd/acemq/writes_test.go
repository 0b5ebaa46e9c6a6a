package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The command writes nowhere it was not asked to: `certs` without --dir
// puts its private keys under the user's configuration directory, and
// `bench` without --out writes no report. Each runs in an empty working
// directory that must still be empty afterwards.
func TestTheCommandWritesNothingIntoTheWorkingDirectoryUnasked(t *testing.T) {
	config := t.TempDir()
	for _, args := range [][]string{
		{"certs"},
		{"bench", "--url", "memory://writes", "--count", "200"},
	} {
		t.Run(args[0], func(t *testing.T) {
			work := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, acemqBinary, args...)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+config)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("acemq %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			left, err := os.ReadDir(work)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Fatalf("acemq %s wrote %s into the working directory unasked", strings.Join(args, " "), left[0].Name())
			}
			if args[0] == "certs" {
				want := filepath.Join(config, "acemq", "certs")
				if _, err := os.Stat(filepath.Join(want, "client.key")); err != nil {
					t.Fatalf("acemq certs without --dir did not write into %s: %v\n%s", want, err, out)
				}
				if !strings.Contains(string(out), want) {
					t.Fatalf("acemq certs does not say where it wrote (%s):\n%s", want, out)
				}
			}
		})
	}
}
