package acemqtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/schedule"
)

// The service of Example, tested as the docs show (docs/testing.md runs
// the Example's body; it is only compiled there).

func TestTheExampleServiceDeadLettersAnOrderWhilePaymentsIsDown(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		payments := acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			return Charge{}, errors.New("payments is down")
		})
		if err := StartService(t.Context(), h.Conn()); err != nil {
			t.Fatal(err)
		}
		orders := acemq.NewPublisher[Order](h.Conn(), "orders", "order.placed", acemq.PublisherConfig{})
		if _, err := orders.Send(t.Context(), Order{ID: "o-1", Cents: 1250}); err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Retried, 5, acemqtest.Queue("orders.new"))
		h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Reason("exhausted 6 attempts"))
		h.Expect(t, acemqtest.Scheduled, 0)
		if n := len(payments.Requests()); n != 6 {
			t.Errorf("payments was asked %d times, want 6", n)
		}
	})
}

func TestTheExampleServiceRemindsAPaidOrderAnHourLater(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
			t.Fatal(err)
		}
		s, err := schedule.Start(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		calls := 0
		acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			calls++
			if calls == 1 {
				return Charge{}, errors.New("payments timed out")
			}
			return Charge{OK: true}, nil
		})
		if err := StartService(t.Context(), h.Conn()); err != nil {
			t.Fatal(err)
		}
		start := h.Now()
		if _, err := acemq.NewPublisher[Order](h.Conn(), "orders", "order.placed", acemq.PublisherConfig{}).Send(t.Context(), Order{ID: "o-2"}); err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Retried, 1, acemqtest.Queue("orders.new"))
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"), acemqtest.Attempt(2))
		reminder := h.Expect(t, acemqtest.Published, 1, acemqtest.Exchange("orders"), acemqtest.RoutingKey("order.remind"))
		if at := reminder[0].At.Sub(start); at < time.Hour || at > time.Hour+13*time.Second {
			t.Errorf("the reminder went out %s after the order, want an hour after its payment (10 s ± 20 %% later)", at)
		}
	})
}
