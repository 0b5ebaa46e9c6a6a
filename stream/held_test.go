package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
)

// retryHeldEvery sets how often a held reader tries again (the tests
// make it an hour and ask for a try with kickHeld).
func retryHeldEvery(d time.Duration) Option { return func(c *config) { c.heldEvery = d } }

// kickHeld makes a held reader try again now.
func (r *Reader) kickHeld() {
	select {
	case r.heldKick <- struct{}{}:
	default:
	}
}

// The reproduction: the handler fails at offset 1 while
// {stream}.parked is gone, so the parked copy cannot be made. The reader
// used to go on and checkpoint past it (handled 0, 2, 3, 4; checkpoint 4;
// no copy anywhere). It holds at offset 1 instead, says why in Health, and
// moves on only once the copy is made.
func TestAMessageThatCannotBeSetAsideHoldsTheReaderAndItsCheckpoint(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		var l log
		gate := make(chan struct{})
		cp := &MemoryCheckpoints{}
		r := read(t, c, s, "holder", func(_ context.Context, m *Message[event]) acemq.Decision {
			if m.Payload.N == 0 {
				<-gate
			}
			l.add(m)
			if m.Payload.N == 1 {
				return acemq.Retry(errors.New("db down")) // the Park policy sets it aside
			}
			return acemq.Accept()
		}, From(First()), Checkpoint(cp, 1, 0), retryHeldEvery(time.Hour))
		publish(t, c, s, 0, 5)
		// The parked queue goes (an operator, a deploy) before offset 1.
		if _, err := c.DeleteQueue(ctx, acemq.ParkedQueue(s)); err != nil {
			t.Fatal(err)
		}
		close(gate)
		brokertest.Eventually(t, "the reader held at offset 1", func() bool { return r.Held() != nil })
		offs, ns := l.snapshot()
		if fmt.Sprint(ns) != "[0 1]" {
			t.Fatalf("a held reader handled %v, want [0 1] and nothing after", ns)
		}
		if off, _ := r.Handled(); off != offs[0] {
			t.Fatalf("Handled() = %d, want %d: the message that was neither handled nor set aside is not passed", off, offs[0])
		}
		h := r.Health(ctx)
		if h.Status != acemq.StatusDegraded || !strings.Contains(h.Detail, fmt.Sprintf("held at offset %d", offs[1])) || !strings.Contains(h.Detail, acemq.ParkedQueue(s)) {
			t.Fatalf("health %+v, want DEGRADED naming offset %d and %s", h, offs[1], acemq.ParkedQueue(s))
		}
		if saved, ok, _ := cp.Load(ctx, s, "holder"); ok && saved > offs[0] {
			t.Fatalf("the checkpoint moved to %d, past the held offset %d", saved, offs[1])
		}

		// It tries again: subscribing declares the parked queue as any
		// consumer does at start, and the copy is made.
		r.kickHeld()
		brokertest.Eventually(t, "the reader read on", func() bool { return l.count() == 5 && r.Held() == nil })
		if _, ns := l.snapshot(); fmt.Sprint(ns) != "[0 1 2 3 4]" {
			t.Fatalf("handled %v, want [0 1 2 3 4] (the handler is not run again for offset 1)", ns)
		}
		if h := r.Health(ctx); h.Status != acemq.StatusUp {
			t.Fatalf("health after the copy %+v", h)
		}
		p := brokertest.Pull(t, c, acemq.ParkedQueue(s))
		if !strings.Contains(p.Envelope.Error, "db down") {
			t.Fatalf("parked reason %q", p.Envelope.Error)
		}
		if n := brokertest.Depth(t, c, acemq.ParkedQueue(s)); n != 0 {
			t.Fatalf("%d more parked copies", n)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		offs, _ = l.snapshot()
		if saved, ok, _ := cp.Load(ctx, s, "holder"); !ok || saved != offs[4] {
			t.Fatalf("checkpoint %d %v, want %d", saved, ok, offs[4])
		}
	})
}
