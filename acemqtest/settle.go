package acemqtest

import (
	"context"
	"fmt"
	"strings"
	"testing/synctest"
	"time"

	"github.com/acemq-go/acemq"
)

// A Tracker is a part of the service that holds messages outside the
// broker: an outbox relay's stored records, a saga runner's unfinished
// instances. Settle asks each tracked part how much it still holds and
// waits, advancing the clock through its polls and leases, until every one
// says 0. Pending returns how much is left and a few words saying what it
// is ("outbox records"); an error ends Settle with it. Pending is called
// from the test's goroutine while everything else in the bubble is
// blocked, and must not wait for anything else in the bubble.
type Tracker interface {
	Pending(ctx context.Context) (n int, what string, err error)
}

// TrackFunc adapts a function to a Tracker.
type TrackFunc func(ctx context.Context) (n int, what string, err error)

// Pending calls f.
func (f TrackFunc) Pending(ctx context.Context) (int, string, error) { return f(ctx) }

// tick is how often Settle looks again while something it waits for tells
// no event when it moves (a tracked part, a consumer re-subscribing, a
// publish waiting for its confirm): once a virtual second.
const tick = time.Second

// Settle returns once nothing is in flight anywhere: no message ready for
// a consumer, unacked, waiting on a retry rung's or the scheduler's TTL,
// held in a consumer's retry wait or in a handler, held by a Block or
// waiting for its confirm; no Conn recovering and no consumer
// re-subscribing; every tracked part at 0. It lets virtual time pass
// while it waits, event by event, so retries, scheduled messages, polls,
// leases and timeouts fall due in order, and it stops at the instant the
// last of them is done. Messages at rest (in a dead-letter or parked queue,
// in a queue no one consumes) do not count.
//
// It returns an *UnsettledError naming what is still moving when ctx ends,
// or, if ctx has no deadline, after Config.SettleLimit (24 h) of virtual
// time. ctx must belong to the bubble (t.Context() or one derived from it
// inside the bubble): a context from outside would keep the bubble's clock
// from moving. Call Settle from the test's goroutine. Settle cannot end a
// goroutine that waits outside the bubble (a network read): it waits for
// it.
func (h *Harness) Settle(ctx context.Context) error {
	start := time.Now()
	limit := time.NewTimer(h.limit)
	defer limit.Stop()
	if _, ok := ctx.Deadline(); ok {
		limit.Stop()
	}
	for {
		wake := h.changed()
		synctest.Wait()
		// What is pending is asked even when ctx has ended, to say so.
		p, err := h.pending(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if len(p.items) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return &UnsettledError{Pending: p.items, Waited: time.Since(start), Cause: err}
		}
		if err := h.waitForChange(ctx, wake, limit.C, p.silent); err != nil {
			return &UnsettledError{Pending: p.items, Waited: time.Since(start), Cause: err}
		}
	}
}

// waitForChange blocks until wake is closed, a tick passes (when silent),
// ctx ends or the limit passes. Every other goroutine of the bubble being
// blocked, the clock moves to whichever of their timers is next.
func (h *Harness) waitForChange(ctx context.Context, wake <-chan struct{}, limit <-chan time.Time, silent bool) error {
	var tickC <-chan time.Time
	if silent {
		t := time.NewTimer(tick)
		defer t.Stop()
		tickC = t.C
	}
	select {
	case <-wake:
	case <-tickC:
	case <-ctx.Done():
		return ctx.Err()
	case <-limit:
		return fmt.Errorf("the harness's settle limit of %s of virtual time passed", h.limit)
	}
	return nil
}

// SettleNow returns once everything that can happen without the clock
// moving has happened: every handler that can run has run, every hop that
// can be made has been made. Virtual time does not pass; what waits on it
// (a retry wait, a rung's TTL, a scheduled message) is left waiting, and
// Pending lists it. Call it from the test's goroutine.
func (h *Harness) SettleNow() { synctest.Wait() }

// Pending lists what Settle would still wait for, one line each, in the
// words of UnsettledError; nil when nothing is in flight. It does not wait
// for anything: call it after SettleNow, Settle or Advance.
func (h *Harness) Pending(ctx context.Context) ([]string, error) {
	p, err := h.pending(ctx)
	return p.items, err
}

// UnsettledError is Settle's error when its context ended (or its limit
// passed) with messages still in flight. It matches the context's error
// with errors.Is.
type UnsettledError struct {
	// Pending says what was still moving, one line each
	// ("orders.new: 1 unacked (in a handler or held for a retry)").
	Pending []string
	// Waited is how much virtual time Settle let pass.
	Waited time.Duration
	Cause  error
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("acemqtest: not settled after %s of virtual time (%v); still in flight: %s", e.Waited, e.Cause, strings.Join(e.Pending, "; "))
}

func (e *UnsettledError) Unwrap() error { return e.Cause }

// pendingWork is what Settle waits for.
type pendingWork struct {
	items []string
	// silent is set when something in items moves without an event the
	// harness hears of, so Settle must look again on its own.
	silent bool
}

func (p *pendingWork) add(silent bool, format string, args ...any) {
	p.items = append(p.items, fmt.Sprintf(format, args...))
	p.silent = p.silent || silent
}

// pending reads the broker, the Conns and the trackers.
func (h *Harness) pending(ctx context.Context) (pendingWork, error) {
	var p pendingWork
	s := h.broker.Snapshot()
	unacked := 0
	for _, q := range s.Queues {
		unacked += q.Unacked
		if q.Unacked > 0 {
			p.add(false, "%s: %d unacked (in a handler or held for a retry)", q.Name, q.Unacked)
		}
		switch {
		case q.Ready == 0:
		case q.Consumers > 0:
			p.add(false, "%s: %d ready for its consumers", q.Name, q.Ready)
		case q.Expires:
			p.add(false, "%s: %d waiting for the queue's TTL of %s", q.Name, q.Ready, q.TTL)
		}
	}
	if s.Held > 0 {
		p.add(false, "%d publishes held by the broker's alarm (Block) until Unblock", s.Held)
	}
	if s.Withheld > 0 {
		p.add(false, "%d publishes whose confirms the broker withholds (StopConfirming) until ResumeConfirming", s.Withheld)
	}
	h.mu.Lock()
	conns := append([]*acemq.Conn(nil), h.conns...)
	trackers := append([]Tracker(nil), h.trackers...)
	h.mu.Unlock()
	for i, c := range conns {
		r := c.Health(ctx)
		name := "the harness's Conn"
		if i > 0 {
			name = fmt.Sprintf("Conn %d", i+1)
		}
		if r.Recovering {
			p.add(false, "%s: recovering a lost connection", name)
		}
		for _, q := range r.Stalled {
			p.add(true, "%s: the consumer of %s stopped reading and is re-subscribing", name, q)
		}
		if int(r.InFlight) > unacked {
			p.add(true, "%s: %d deliveries in flight whose channel is gone", name, int(r.InFlight)-unacked)
		}
		if n := c.Stats().Outstanding; n > 0 {
			p.add(true, "%s: %d publishes waiting for the broker's confirm", name, n)
		}
	}
	for _, x := range trackers {
		n, what, err := x.Pending(ctx)
		if err != nil {
			return p, fmt.Errorf("acemqtest: asking a tracked part what it holds: %w", err)
		}
		if n > 0 {
			p.add(true, "%d %s", n, what)
		}
	}
	return p, nil
}
