package acemqtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
)

type order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// ordersTopology is a service's own: an exchange, its queue, bound.
func ordersTopology() *acemq.Topology {
	return acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.*")
}

// ladder is exponential(6, 10s, 5m): 10 s and 20 s held in the consumer,
// 40 s, 80 s and 160 s on broker rungs, then the dead-letter queue.
var ladder = acemq.Exponential(6, 10*time.Second, 5*time.Minute)

func consume(t *testing.T, h *acemqtest.Harness, queue string, cfg acemq.ConsumerConfig, fn acemq.Handler[order]) *acemq.Consumer {
	t.Helper()
	k, err := acemq.Consume(t.Context(), h.Conn(), queue, fn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func send(t *testing.T, h *acemqtest.Harness, exchange, key string, o order) acemq.Sent {
	t.Helper()
	s, err := acemq.NewPublisher[order](h.Conn(), exchange, key, acemq.PublisherConfig{}).Send(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSettleRunsTheRetryLadderToTheDeadLetterQueue(t *testing.T) {
	real := time.Now()
	var waited time.Duration
	acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		start := h.Now()
		consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: ladder}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			return acemq.Retry(errors.New("card declined"))
		})
		sent := send(t, h, "orders", "order.placed", order{ID: "o-1", Cents: 500})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		waited = h.Now().Sub(start)
		h.Expect(t, acemqtest.Published, 1, acemqtest.Type("order.placed"), acemqtest.Exchange("orders"))
		h.Expect(t, acemqtest.Consumed, 6, acemqtest.ID(sent.Envelope.ID))
		retried := h.Expect(t, acemqtest.Retried, 5, acemqtest.Queue("orders.new"))
		for i, r := range retried {
			if r.Envelope.Attempt != i+1 {
				t.Errorf("retry %d was attempt %d", i+1, r.Envelope.Attempt)
			}
			if want := ladder.Schedule()[i]; r.RetryDelay != want || r.InBroker != (want >= 30*time.Second) {
				t.Errorf("retry %d: %s in broker %v, want %s", i+1, r.RetryDelay, r.InBroker, want)
			}
		}
		dead := h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Reason("exhausted 6 attempts: card declined"))
		if dead[0].Target != "orders.new.dlq" || dead[0].Envelope.Attempt != 6 {
			t.Errorf("dead letter %+v", dead[0])
		}
		// 10 s and 20 s are jittered by ±20 %, the rungs are exact.
		if min, max := 8*time.Second+16*time.Second+280*time.Second, 12*time.Second+24*time.Second+280*time.Second+time.Second; waited < min || waited > max {
			t.Errorf("the ladder took %s of virtual time, want %s to %s", waited, min, max)
		}
		if p, err := h.Pending(t.Context()); err != nil || p != nil {
			t.Errorf("pending after Settle: %q, %v", p, err)
		}
	})
	t.Logf("%s of retry waits in %s of real time", waited, time.Since(real))
}

func TestSettleNowLeavesTheClockAndListsWhatWaits(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: acemq.Fixed(2, 10*time.Second)}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			if m.Envelope.Attempt == 1 {
				return acemq.Retry(errors.New("not yet"))
			}
			return acemq.Accept()
		})
		send(t, h, "orders", "order.placed", order{ID: "o-1"})
		before := h.Now()
		h.SettleNow()
		if !h.Now().Equal(before) {
			t.Fatalf("SettleNow moved the clock by %s", h.Now().Sub(before))
		}
		h.Expect(t, acemqtest.Retried, 1)
		h.Expect(t, acemqtest.Acked, 0)
		p, err := h.Pending(t.Context())
		if err != nil || len(p) != 1 || p[0] != "orders.new: 1 unacked (in a handler or held for a retry)" {
			t.Fatalf("pending %q, %v: want the delivery held for its retry", p, err)
		}
		h.Advance(9 * time.Second)
		h.Expect(t, acemqtest.Acked, 0)
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Attempt(2))
	})
}

func TestSettleSaysWhatIsStillMovingWhenItsContextEnds(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		release := make(chan struct{})
		consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return acemq.Accept()
		})
		send(t, h, "orders", "order.placed", order{ID: "stuck"})
		send(t, h, "orders", "order.placed", order{ID: "behind it"})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := h.Settle(ctx)
		var ue *acemqtest.UnsettledError
		if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Settle: %v, want an *UnsettledError for the context's deadline", err)
		}
		if ue.Waited != time.Minute {
			t.Errorf("waited %s, want the context's minute", ue.Waited)
		}
		for _, want := range []string{"orders.new: 2 unacked (in a handler or held for a retry)", "not settled after 1m0s of virtual time (context deadline exceeded)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		close(release)
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Acked, 2)
	})
}

func TestSettleGivesUpAtItsLimitWithoutAContextDeadline(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{SettleLimit: time.Hour}, func(t *testing.T, h *acemqtest.Harness) {
		h.Track(acemqtest.TrackFunc(func(context.Context) (int, string, error) { return 3, "records nobody relays", nil }))
		err := h.Settle(t.Context())
		var ue *acemqtest.UnsettledError
		if !errors.As(err, &ue) || ue.Waited != time.Hour || len(ue.Pending) != 1 || ue.Pending[0] != "3 records nobody relays" {
			t.Fatalf("Settle: %v (%+v), want the hour's limit and the tracked records", err, ue)
		}
	})
}

func TestStartOutsideABubbleSaysWhereToRunIt(t *testing.T) {
	f := &fatalT{TB: t}
	if h := acemqtest.Start(f, acemqtest.Config{}); h != nil {
		t.Fatal("Start made a harness outside a synctest bubble")
	}
	if !strings.Contains(f.msg, "Start must run inside a testing/synctest bubble") || !strings.Contains(f.msg, "acemqtest.Run") {
		t.Fatalf("Start's failure: %q", f.msg)
	}
}

// TestSettleAsksATrackerWhatItHoldsEvenAsItsContextEnds: a tracked part
// answers with a query that fails on a cancelled context, as a database
// does; when Settle's context ends it must still say what the part holds
// (it returned the query's failure instead).
func TestSettleAsksATrackerWhatItHoldsEvenAsItsContextEnds(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{}, func(t *testing.T, h *acemqtest.Harness) {
		h.Track(acemqtest.TrackFunc(func(ctx context.Context) (int, string, error) {
			if err := ctx.Err(); err != nil {
				return 0, "", err
			}
			return 2, "records in the outbox", nil
		}))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := h.Settle(ctx)
		var ue *acemqtest.UnsettledError
		if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) || len(ue.Pending) != 1 || ue.Pending[0] != "2 records in the outbox" {
			t.Fatalf("Settle: %v, want an UnsettledError naming the 2 records", err)
		}
	})
}
