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

// TestEveryExampleRuns builds every examples/*/ program and every program
// of the manual (examples/manual/*/, each shown whole on a page) and runs
// each on the in-process broker and, with -url, on the test RabbitMQ node,
// asserting exit status 0.
func TestEveryExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example program; not in -short")
	}
	dirs, err := filepath.Glob("*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example program found (%v)", err)
	}
	// The manual's programs, each shown whole on a page (docs/*.md).
	manual, err := filepath.Glob("manual/*/main.go")
	if err != nil || len(manual) == 0 {
		t.Fatalf("no program under examples/manual (%v)", err)
	}
	dirs = append(dirs, manual...)
	bin := t.TempDir()
	// Two builds, as the manual's names may repeat a top-level one's; the
	// second finds the first's packages in the build cache.
	var top []string
	for _, main := range dirs {
		if d := filepath.Dir(main); !strings.HasPrefix(d, "manual") {
			top = append(top, "./"+d)
		}
	}
	for _, b := range [][]string{
		append([]string{"build", "-o", bin + string(filepath.Separator)}, top...),
		{"build", "-o", filepath.Join(bin, "manual") + string(filepath.Separator), "./manual/..."},
	} {
		if out, err := exec.Command("go", b...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
		}
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
