package acemqtest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/schedule"
)

// realBudget is far more real time than every scenario below needs (they
// take milliseconds) and far less than the virtual time they span (over an
// hour): a library wait that read the wall clock would blow it, or leave
// Settle waiting until its virtual limit.
const realBudget = time.Minute

// waits are the library's waits, each in a scenario run under the
// harness: what it waits for, how much virtual time it must take at
// least, and the scenario. Each scenario must finish (Settle within
// twice its wait) on the bubble's clock alone.
var waits = []struct {
	name string
	min  time.Duration
	run  func(t *testing.T, h *acemqtest.Harness)
}{
	{"retry waits in the consumer and on broker rungs, to the dead-letter queue", 8*time.Second + 16*time.Second + 280*time.Second, func(t *testing.T, h *acemqtest.Harness) {
		consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: ladder}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			return acemq.Retry(errors.New("no"))
		})
		send(t, h, "orders", "order.placed", order{ID: "o"})
		settleWithin(t, h, 10*time.Minute)
		h.Expect(t, acemqtest.DeadLettered, 1)
	}},
	{"an in-progress hold", 5 * time.Second, func(t *testing.T, h *acemqtest.Harness) {
		consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			if m.Redelivered || h.Records().Of(acemqtest.InProgress) != nil {
				return acemq.Accept()
			}
			return acemq.InProgress(0)
		})
		send(t, h, "orders", "order.placed", order{ID: "o"})
		settleWithin(t, h, 10*time.Second)
		h.Expect(t, acemqtest.Acked, 1)
	}},
	{"the last-resort hold when a set-aside cannot be made", 5 * time.Second, func(t *testing.T, h *acemqtest.Harness) {
		var runs atomic.Int64
		// No dead-letter half is declared, so the reject's copy to
		// orders.new.dlq and the minimal copy to orders.new.parked after it
		// are both unroutable (a fallback each); the delivery is held 5 s
		// and handed back.
		consume(t, h, "orders.new", acemq.ConsumerConfig{NoDeadLetterDeclaration: true}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			if runs.Add(1) == 1 {
				return acemq.Reject(errors.New("no"))
			}
			return acemq.Accept()
		})
		send(t, h, "orders", "order.placed", order{ID: "o"})
		settleWithin(t, h, 10*time.Second)
		h.Expect(t, acemqtest.FellBack, 2)
		h.Expect(t, acemqtest.Acked, 1)
	}},
	{"a request's timeout", rpc.DefaultTimeout, func(t *testing.T, h *acemqtest.Harness) {
		if err := h.Conn().Apply(t.Context(), acemq.NewTopology().Queue("silent", acemq.QueueOptions{})); err != nil {
			t.Fatal(err)
		}
		req, err := rpc.NewRequester(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		defer req.Close(context.Background())
		if _, err := rpc.Request[order, quote](t.Context(), req, "", "silent", order{ID: "o"}); !errors.Is(err, rpc.ErrRequestTimedOut) {
			t.Fatalf("request: %v", err)
		}
	}},
	{"a scheduled message an hour ahead (the scheduler's rungs)", time.Hour - time.Second, func(t *testing.T, h *acemqtest.Harness) {
		if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
			t.Fatal(err)
		}
		s, err := schedule.Start(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision { return acemq.Accept() })
		if err := schedule.After(t.Context(), h.Conn(), "orders", "order.remind", order{ID: "o"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		settleWithin(t, h, 2*time.Hour)
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"))
	}},
	{"a recovery's back-off after a lost connection", 500 * time.Millisecond, func(t *testing.T, h *acemqtest.Harness) {
		c := h.Connect(acemq.Config{RecoveryInterval: time.Second})
		h.Broker().DropConnections()
		settleWithin(t, h, time.Minute)
		if r := c.Health(t.Context()); !r.Open {
			t.Fatalf("not recovered: %s", r.Detail)
		}
	}},
	{"a publish's confirm timeout", 10 * time.Second, func(t *testing.T, h *acemqtest.Harness) {
		h.Broker().StopConfirming()
		_, err := acemq.NewPublisher[order](h.Conn(), "orders", "order.placed", acemq.PublisherConfig{}).Send(t.Context(), order{ID: "o"})
		var pe *acemq.PublishError
		if !errors.As(err, &pe) || !pe.Sent {
			t.Fatalf("send: %v", err)
		}
		h.Broker().ResumeConfirming()
	}},
	{"a drain's deadline and grace", 20*time.Second + 500*time.Millisecond, func(t *testing.T, h *acemqtest.Harness) {
		k := consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			time.Sleep(time.Minute) // a handler that ignores its context
			return acemq.Accept()
		})
		send(t, h, "orders", "order.placed", order{ID: "o"})
		h.SettleNow()
		if err := k.Close(context.Background()); !errors.Is(err, acemq.ErrDrainTimeout) {
			t.Fatalf("close: %v", err)
		}
		h.Advance(time.Minute) // the handler returns; its decision is discarded
	}},
}

// settleWithin settles, failing t if it takes more than d of virtual time.
func settleWithin(t *testing.T, h *acemqtest.Harness, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := h.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEveryLibraryWaitIsVirtual runs each library wait under the harness
// and fails if one took less virtual time than it waits (it did not wait
// on the bubble's clock) or if together they took more than realBudget of
// real time (one waited on the wall clock).
func TestEveryLibraryWaitIsVirtual(t *testing.T) {
	start := time.Now()
	var total time.Duration
	for _, w := range waits {
		acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
			before := h.Now()
			w.run(t, h)
			took := h.Now().Sub(before)
			total += took
			if took < w.min {
				t.Errorf("%s took %s of virtual time, less than its %s", w.name, took, w.min)
			}
			t.Logf("%s: %s of virtual time", w.name, took)
		})
	}
	real := time.Since(start)
	t.Logf("%s of virtual waits in %s of real time", total, real)
	if real > realBudget {
		t.Fatalf("the library's waits took %s of real time (%s virtual); one of them reads the wall clock", real, total)
	}
}
