// Package examples_test runs every program under examples/, so a change
// that breaks one fails `make test` (each exits non-zero when its flow did
// not do what it says).
package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/examples/internal/testenv"
)

// TestEveryExampleRuns builds every examples/*/ program in one go build
// (one command, so the packages compile once and link in parallel) and
// runs each on the in-process broker and, with -url, on the test RabbitMQ
// node, asserting exit status 0.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example program; not in -short")
	}
	dirs, err := filepath.Glob("*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example program found (%v)", err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./...")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/...: %v\n%s", err, out)
	}
	for _, main := range dirs {
		name := filepath.Dir(main)
		exe := filepath.Join(bin, name)
		if _, err := os.Stat(exe); err != nil {
			t.Fatalf("example %s was not built: %v", name, err)
		}
		src, err := os.ReadFile(main)
		if err != nil {
			t.Fatal(err)
		}
		takesURL := strings.Contains(string(src), `flag.String("url"`)
		takesManagement := strings.Contains(string(src), `flag.String("management"`)
		t.Run(name+"/memory", func(t *testing.T) {
			t.Parallel()
			runExample(t, exe)
		})
		if takesURL {
			t.Run(name+"/rabbitmq", func(t *testing.T) {
				t.Parallel()
				args := []string{"-url", testenv.AMQPURL(t)}
				if takesManagement {
					args = append(args, "-management", testenv.ManagementURL(t))
				}
				runExample(t, exe, args...)
			})
		}
	}
}

func runExample(t *testing.T, exe string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	// The examples read ACEMQ_URL / ACEMQ_DB as defaults; the run must be
	// the one asked for, not one the environment chose.
	cmd.Env = withoutVars(os.Environ(), "ACEMQ_URL=", "ACEMQ_DB=", "ACEMQ_MANAGEMENT_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(exe), args, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

func withoutVars(env []string, prefixes ...string) []string {
	var keep []string
next:
	for _, kv := range env {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		keep = append(keep, kv)
	}
	return keep
}
