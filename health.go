package acemq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// HealthStatus is a health report's verdict, in the contract §6 spelling.
type HealthStatus string

// Health statuses. Worst wins when reports are combined:
// DOWN > DEGRADED > UP > UNKNOWN.
const (
	// StatusUp: open and reading. A blocked connection is still up.
	StatusUp HealthStatus = "UP"
	// StatusDegraded: open, but some consumers have stopped reading.
	StatusDegraded HealthStatus = "DEGRADED"
	// StatusDown: not open (closed, closing, recovering), or a check failed.
	StatusDown HealthStatus = "DOWN"
	// StatusUnknown: nothing to judge (no connection was given).
	StatusUnknown HealthStatus = "UNKNOWN"
)

// defaultHealthTimeout bounds an aggregate health check (behaviour §5.2).
const defaultHealthTimeout = 5 * time.Second

func (s HealthStatus) rank() int {
	switch s {
	case StatusDown:
		return 3
	case StatusDegraded:
		return 2
	case StatusUp:
		return 1
	}
	return 0
}

// HealthReport is a health verdict with the facts behind it. Reports from
// Conn.Health fill the connection fields; reports from other checks may
// carry only Status and Detail; an aggregate keeps each check's report in
// Parts, by name.
type HealthReport struct {
	Status HealthStatus
	// Detail is the sentence explaining the status; empty when there is
	// nothing to say.
	Detail string
	// CheckedAt is when the report was made.
	CheckedAt time.Time

	// Transport is "rabbitmq" or "memory".
	Transport string
	// Open is true when the connection is open (blocked or not).
	Open bool
	// Recovering is true while a lost connection is being recovered.
	Recovering bool
	// Blocked is true when the broker has blocked publishing.
	Blocked bool
	// BlockedReason is the broker's reason ("low on memory"), if blocked.
	BlockedReason string
	// InFlight counts deliveries taken from the broker and not yet settled.
	InFlight int64
	// Consumers counts the Conn's consumers.
	Consumers int
	// Stalled lists, sorted, the queues whose consumers stopped reading.
	Stalled []string

	// Parts holds an aggregate's sub-reports by check name.
	Parts map[string]HealthReport
}

// Health reports the Conn's health from local state only: it never asks
// the broker (a blocked broker stops reading, so a question could hang),
// so it answers in microseconds and ignores ctx. First match wins:
//
//   - closed: DOWN "the connection has been closed" ("draining" while Close
//     runs); gave up recovering: DOWN "the connection has been lost and
//     recovery gave up: {cause}";
//   - recovering: DOWN "the connection has been lost and is being recovered";
//   - blocked: UP "the broker has blocked this connection; publishing is
//     paused: {reason}" (DEGRADED if consumers also stopped reading, the
//     details joined);
//   - consumers stopped reading: DEGRADED "these consumers have stopped
//     reading: q1, q2";
//   - otherwise UP.
//
// Health is a readiness signal; never wire it to liveness. It is safe for
// concurrent use.
func (c *Conn) Health(ctx context.Context) HealthReport {
	r := HealthReport{
		CheckedAt: time.Now(),
		Transport: c.links.driver.Name(),
	}
	r.Blocked, r.BlockedReason = c.pub.isBlocked()
	r.Consumers, r.InFlight, r.Stalled = c.consumers.summary()

	switch c.State() {
	case StateClosing:
		r.Status, r.Detail = StatusDown, "draining"
		return r
	case StateClosed:
		r.Status, r.Detail = StatusDown, "the connection has been closed"
		if cause := c.life.gaveUpErr(); cause != nil {
			if u := errors.Unwrap(cause); u != nil {
				cause = u
			}
			r.Detail = "the connection has been lost and recovery gave up: " + cause.Error()
		}
		return r
	case StateLost, StateReopening:
		r.Recovering = true
		r.Status, r.Detail = StatusDown, "the connection has been lost and is being recovered"
		return r
	}
	r.Open = true
	r.Status = StatusUp
	var parts []string
	if r.Blocked {
		d := "the broker has blocked this connection; publishing is paused"
		if r.BlockedReason != "" {
			d += ": " + r.BlockedReason
		}
		parts = append(parts, d)
	}
	if len(r.Stalled) > 0 {
		r.Status = StatusDegraded
		parts = append(parts, "these consumers have stopped reading: "+strings.Join(r.Stalled, ", "))
	}
	r.Detail = strings.Join(parts, "; ")
	return r
}

// Check is one named health check for an aggregate. Check must honour
// ctx; one that does not answer by the aggregate's deadline is reported
// DOWN.
type Check interface {
	Name() string
	Check(ctx context.Context) HealthReport
}

type funcCheck struct {
	name string
	fn   func(context.Context) HealthReport
}

func (f funcCheck) Name() string                           { return f.name }
func (f funcCheck) Check(ctx context.Context) HealthReport { return f.fn(ctx) }

// CheckFunc makes a Check named name from fn; CheckFunc("acemq", c.Health)
// is a Conn's own check.
func CheckFunc(name string, fn func(ctx context.Context) HealthReport) Check {
	return funcCheck{name: name, fn: fn}
}

// CheckAll runs checks concurrently under one deadline (timeout, or
// defaultHealthTimeout when timeout ≤ 0, and ctx's own) and combines
// them: the worst status wins (DOWN > DEGRADED > UP; no checks = UP). A
// check that does not answer in time is DOWN "the check did not answer
// within {timeout}"; one that panics is DOWN "the check panicked: {value}".
// Every sub-report is kept in Parts by name, and Detail joins
// "name: detail; …" for every part with something to say (a blocked UP
// included). CheckAll returns by the deadline even if a check does not; that
// check's goroutine ends when the check returns.
func CheckAll(ctx context.Context, timeout time.Duration, checks ...Check) HealthReport {
	if timeout <= 0 {
		timeout = defaultHealthTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		i int
		r HealthReport
	}
	answers := make(chan answer, len(checks))
	for i, ch := range checks {
		go func() {
			defer func() {
				if v := recover(); v != nil {
					answers <- answer{i, HealthReport{Status: StatusDown, Detail: fmt.Sprintf("the check panicked: %v", v), CheckedAt: time.Now()}}
				}
			}()
			answers <- answer{i, ch.Check(ctx)}
		}()
	}
	got := make([]*HealthReport, len(checks))
	for n := 0; n < len(checks); n++ {
		select {
		case a := <-answers:
			got[a.i] = &a.r
			continue
		case <-ctx.Done():
		}
		break
	}
	agg := HealthReport{Status: StatusUp, CheckedAt: time.Now(), Parts: make(map[string]HealthReport, len(checks))}
	var details []string
	for i, ch := range checks {
		var r HealthReport
		if got[i] != nil {
			r = *got[i]
		} else {
			r = HealthReport{Status: StatusDown, Detail: "the check did not answer within " + timeout.String(), CheckedAt: agg.CheckedAt}
		}
		if r.Status == "" {
			r.Status = StatusUnknown
		}
		agg.Parts[ch.Name()] = r
		if r.Status.rank() > agg.Status.rank() {
			agg.Status = r.Status
		}
		if r.Detail != "" {
			details = append(details, ch.Name()+": "+r.Detail)
		}
	}
	agg.Detail = strings.Join(details, "; ")
	return agg
}
