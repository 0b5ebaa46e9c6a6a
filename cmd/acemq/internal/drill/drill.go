// Package drill holds the reliability drills behind `acemq drill NAME`:
// crash, restart, alarm, soak and hostile. Each runs against a real broker
// URL, is bounded in time, and ends in a Result whose Line is one verdict
// line with its numbers. The command prints that line and exits non-zero
// when the drill failed; `make test` runs a short version of each through
// this package's tests.
//
// A drill never shortens a library setting to go faster: recovery runs at
// the library's own 1 s first interval, and where a drill has a pace of its
// own (the soak's time between forced reconnects) it is a field of its
// options.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
)

// Env is what every drill needs: where the broker is and how to control it.
type Env struct {
	// URL is the broker's AMQP URL.
	URL string
	// Ctl is the command (and leading arguments) that runs rabbitmqctl
	// against the broker, e.g. ["rabbitmqctl", "-n", "rabbit@host"]. The
	// restart, alarm and soak drills need it; crash and hostile do not.
	Ctl []string
	// Management is the broker's management HTTP API
	// (http://user:pass@host:15672/). When set, the soak closes
	// connections through it instead of rabbitmqctl.
	Management string
	// Progress receives one line per step, for a person watching; nil
	// discards them.
	Progress io.Writer
}

func (e Env) logf(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// ctl runs rabbitmqctl with args and returns its output.
func (e Env) ctl(ctx context.Context, args ...string) (string, error) {
	if len(e.Ctl) == 0 {
		return "", errors.New("acemq: this drill controls the broker with rabbitmqctl; give its command with --ctl (or set ACEMQ_TEST_RABBITMQCTL)")
	}
	// rabbitmqctl boots an Erlang VM per call: about a second on an idle
	// machine, minutes on an overloaded one.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	argv := append(append([]string{}, e.Ctl[1:]...), args...)
	out, err := exec.CommandContext(ctx, e.Ctl[0], argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("acemq: %s %s failed: %v: %s", strings.Join(e.Ctl, " "), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// connect opens a Conn for a drill with the library's defaults, a quiet
// logger and the drill's client name laid over cfg (at most one).
func (e Env) connect(ctx context.Context, cfg ...acemq.Config) (*acemq.Conn, error) {
	var c acemq.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Logger, c.ClientName = slog.New(slog.DiscardHandler), "acemq-drill"
	return acemq.Connect(ctx, e.URL, c)
}

// Result is a drill's outcome: its numbers in the order they were set and
// the problems that failed it.
type Result struct {
	Drill    string
	Took     time.Duration
	names    []string
	values   map[string]string
	Problems []string
}

func newResult(name string) *Result {
	return &Result{Drill: name, values: map[string]string{}}
}

// Set records a number (any value printed with %v) under name.
func (r *Result) Set(name string, v any) {
	if _, ok := r.values[name]; !ok {
		r.names = append(r.names, name)
	}
	r.values[name] = fmt.Sprint(v)
}

// Get returns the number recorded under name, "" if none.
func (r *Result) Get(name string) string { return r.values[name] }

// Failf records a problem; any problem fails the drill.
func (r *Result) Failf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// OK reports whether the drill passed.
func (r *Result) OK() bool { return len(r.Problems) == 0 }

// Line is the verdict line: drill name, PASS or FAIL, every number as
// name=value, the time taken, and on failure each problem.
func (r *Result) Line() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "drill %s: %s", r.Drill, verdict)
	for _, n := range r.names {
		fmt.Fprintf(&b, " %s=%s", n, r.values[n])
	}
	fmt.Fprintf(&b, " took=%s", r.Took.Round(100*time.Millisecond))
	if !r.OK() {
		fmt.Fprintf(&b, " — %s", strings.Join(r.Problems, "; "))
	}
	return b.String()
}

// unique returns prefix plus a suffix unique to this process and moment,
// for queue names on a shared broker.
func unique(prefix string) string {
	return fmt.Sprintf("%s.%d.%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000_000)
}

// ms renders d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// drainIDs takes every message off queue, acking each, and counts the
// envelope ids it saw. It stops when the queue reports empty.
func drainIDs(ctx context.Context, c *acemq.Conn, queue string) (map[string]int, error) {
	p, err := c.NewPuller(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	seen := map[string]int{}
	for {
		m, ok, err := p.Pull(ctx, queue)
		if err != nil {
			return seen, err
		}
		if !ok {
			return seen, nil
		}
		seen[m.Envelope.ID]++
		if err := m.Ack(); err != nil {
			return seen, err
		}
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
