package acemqtest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/schedule"
)

// TestMeasureWhatAHarnessTestCosts runs whole harness tests (start, the
// scenario, Settle, the checks, the clean-up) and logs their real time:
// the 6-rung exponential ladder to .dlq (over 5 minutes of waits) and a
// message scheduled an hour ahead. docs/performance.md quotes the numbers
// (go test -run TestMeasureWhatAHarnessTestCosts -v ./acemqtest/); the
// saga's timeout is measured beside the saga (saga/harness_test.go). It
// asserts nothing about time: timings depend on the machine.
func TestMeasureWhatAHarnessTestCosts(t *testing.T) {
	const runs = 25
	for _, m := range []struct {
		name string
		run  func(t *testing.T, h *acemqtest.Harness)
	}{
		{"exponential(6, 10s, 5m) to .dlq", func(t *testing.T, h *acemqtest.Harness) {
			consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: ladder}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
				return acemq.Retry(errors.New("card declined"))
			})
			send(t, h, "orders", "order.placed", order{ID: "o"})
			if err := h.Settle(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Reason("exhausted 6 attempts"))
		}},
		{"a message scheduled an hour ahead", func(t *testing.T, h *acemqtest.Harness) {
			if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
				t.Fatal(err)
			}
			s, err := schedule.Start(t.Context(), h.Conn())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision { return acemq.Accept() })
			if err := schedule.After(t.Context(), h.Conn(), "orders", "order.remind", order{ID: "o"}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := h.Settle(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"))
		}},
	} {
		took := make([]time.Duration, 0, runs)
		var virtual time.Duration
		for range runs {
			start := time.Now()
			acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
				v := h.Now()
				m.run(t, h)
				virtual = h.Now().Sub(v)
			})
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("%s: %s of virtual time; a whole test takes %s (median of %d), %s at most", m.name, virtual.Round(time.Second), took[runs/2].Round(10*time.Microsecond), runs, took[runs-1].Round(10*time.Microsecond))
	}
}
