package saga

import (
	"errors"
	"strings"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// Clock is the time a Runner reads and waits on. Without WithClock a
// runner writes and compares every lease on the database's clock (the one
// clock all runners share, so a host whose clock is wrong cannot take an
// instance early) and waits on the system's. With WithClock it does both
// on the Clock: a test's fake clock, advanced by hand, then drives the
// leases, the renewals and the step timeouts of every runner given it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// the returned stop is called first (stop reports whether it
	// prevented the call), as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// systemClock is the Clock of a runner without WithClock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// WithClock makes the runner read the time from c and wait on it, leases
// included (see Clock): for tests that move time by hand. Every runner
// sharing a database must then be given the same Clock.
func WithClock(c Clock) Option {
	return func(r *Runner) error {
		if c == nil {
			return errors.New("acemq: saga.WithClock needs a Clock")
		}
		r.clock, r.dbClock = c, false
		return nil
	}
}

// timing is how a runner (or an operator's Store) writes times: the
// database's clock, or its Clock's reading bound as an argument.
type timing struct {
	d       sqlstore.Dialect
	clock   Clock
	dbClock bool // "now" in SQL is the database's clock
}

// bind rewrites query for the dialect, replacing each {now} with the
// current time in epoch ms (the database's, or the Clock's, read once for
// the whole statement), and returns it with its arguments in order.
func (t timing) bind(query string, args ...any) (string, []any) {
	expr, now := t.d.NowMillis(), []any(nil)
	if !t.dbClock {
		expr, now = "CAST(? AS BIGINT)", []any{t.clock.Now().UnixMilli()}
		if t.d == sqlstore.MySQL {
			expr = "CAST(? AS SIGNED)"
		}
	}
	var b strings.Builder
	out := make([]any, 0, len(args)+2)
	next := 0
	for {
		j := strings.IndexAny(query, "?{")
		if j < 0 {
			b.WriteString(query)
			break
		}
		switch {
		case query[j] == '?':
			b.WriteString(query[:j+1])
			out = append(out, args[next])
			next++
			query = query[j+1:]
		case strings.HasPrefix(query[j:], "{now}"):
			b.WriteString(query[:j])
			b.WriteString(expr)
			out = append(out, now...)
			query = query[j+len("{now}"):]
		default:
			b.WriteString(query[:j+1])
			query = query[j+1:]
		}
	}
	return t.d.Rebind(b.String()), out
}
