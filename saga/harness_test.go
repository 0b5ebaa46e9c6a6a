package saga

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/saga/internal/dbtest"
)

// orderSaga reserves stock and charges a card, announcing each step and
// each compensation on the exchange "orders"; charge is given.
func orderSaga(t *testing.T, h *acemqtest.Harness, charge Func) *Definition {
	t.Helper()
	announce := func(key string) Func {
		return func(ctx context.Context, c Call) error {
			_, err := h.Conn().Publish(ctx, "orders", key, string(c.Subject), acemq.SendOptions{})
			return err
		}
	}
	def, err := Define("order",
		Step{Name: "reserve", Action: announce("stock.reserved"), Compensate: announce("stock.released")},
		Step{Name: "charge", Action: charge, Compensate: announce("payment.refunded")},
	)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// sagaTopology keeps what the saga announces in one queue.
func sagaTopology() *acemq.Topology {
	return acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.events", acemq.QueueOptions{}).
		Bind("orders.events", "orders", "#")
}

// runnerIn makes a runner over a fresh SQLite database (pure Go: nothing
// in the bubble waits on the network) on the bubble's clock.
func runnerIn(t *testing.T, opts ...Option) *Runner {
	t.Helper()
	db, d := dbtest.SQLite(t)
	r, err := NewRunner(db, d, append([]Option{WithClock(acemqtest.Clock{})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.EnsureSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// TestAHungStepTimesOutAndIsCompensatedUnderTheHarness: a charge that
// never answers is cut off by the step timeout (a minute), and the saga
// compensates both steps, the charge as uncertain. The minute passes in
// virtual time.
func TestAHungStepTimesOutAndIsCompensatedUnderTheHarness(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: sagaTopology()}, hungStep)
}

// TestMeasureASagaStepTimeoutUnderTheHarness logs what the test above costs
// in real time, a whole test each (docs/performance.md: go test -run
// TestMeasureASagaStepTimeoutUnderTheHarness -v ./saga/). It asserts
// nothing about time.
func TestMeasureASagaStepTimeoutUnderTheHarness(t *testing.T) {
	const runs = 25
	took := make([]time.Duration, 0, runs)
	for range runs {
		start := time.Now()
		acemqtest.Run(t, acemqtest.Config{Topology: sagaTopology()}, hungStep)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("a saga step's %s timeout and its compensations: a whole test takes %s (median of %d), %s at most", DefaultStepTimeout, took[runs/2].Round(10*time.Microsecond), runs, took[runs-1].Round(10*time.Microsecond))
}

func hungStep(t *testing.T, h *acemqtest.Harness) {
	r := runnerIn(t)
	uncertain := false
	def := orderSaga(t, h, func(ctx context.Context, c Call) error {
		<-ctx.Done() // a payment gateway that never answers
		return ctx.Err()
	})
	def.steps[1].Compensate = func(ctx context.Context, c Call) error {
		uncertain = c.Uncertain
		_, err := h.Conn().Publish(ctx, "orders", "payment.refunded", string(c.Subject), acemq.SendOptions{})
		return err
	}
	began := h.Now()
	res, err := r.Run(t.Context(), def, []byte("o-1"), "text/plain")
	if err != nil || res.Outcome != Compensated || res.FailedStep != "charge" {
		t.Fatalf("run: %+v, %v; want compensated at charge", res, err)
	}
	if took := h.Now().Sub(began); took < DefaultStepTimeout {
		t.Errorf("the run took %s of virtual time, less than the step timeout %s", took, DefaultStepTimeout)
	}
	if !uncertain {
		t.Error("the timed-out charge was compensated without Call.Uncertain")
	}
	if err := h.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"stock.reserved", "payment.refunded", "stock.released"} {
		h.Expect(t, acemqtest.Published, 1, acemqtest.RoutingKey(key))
	}
}

// TestAnAbandonedInstanceIsFinishedByASweepUnderTheHarness: a caller gives up
// on a run part way; another runner's sweep, a minute later, carries the
// instance to its end. Settle waits for it because the runner is tracked.
func TestAnAbandonedInstanceIsFinishedByASweepUnderTheHarness(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: sagaTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		db, d := dbtest.SQLite(t)
		a, err := NewRunner(db, d, WithClock(acemqtest.Clock{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.EnsureSchema(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		calls := 0
		def := orderSaga(t, h, func(ctx context.Context, c Call) error {
			if calls++; calls == 1 {
				<-ctx.Done() // the caller goes away while it runs
				return ctx.Err()
			}
			return nil
		})
		b, err := NewRunner(db, d, WithClock(acemqtest.Clock{}), WithSweepEvery(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Register(def); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close(context.Background()) })
		h.Track(b)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err = a.Run(ctx, def, []byte("o-2"), "text/plain")
		cancel()
		if !errors.Is(err, ErrAbandoned) {
			t.Fatalf("the abandoned run: %v, want ErrAbandoned", err)
		}
		if n, _, err := b.Pending(t.Context()); err != nil || n != 1 {
			t.Fatalf("pending %d (%v), want the abandoned instance", n, err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		done, err := b.List(t.Context(), string(Completed))
		if err != nil || len(done) != 1 {
			t.Fatalf("completed instances %d (%v), want the abandoned one finished", len(done), err)
		}
		if calls != 2 {
			t.Errorf("charge ran %d times, want twice: the abandoned call, then the sweep's", calls)
		}
		h.Expect(t, acemqtest.Published, 1, acemqtest.RoutingKey("stock.reserved"))
		h.Expect(t, acemqtest.Published, 0, acemqtest.RoutingKey("stock.released"))
	})
}
