package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/schedule"
)

// start starts the service in a harness, with the scheduler it uses.
func start(t *testing.T, h *acemqtest.Harness) *Service {
	t.Helper()
	if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
		t.Fatal(err)
	}
	sched, err := schedule.Start(t.Context(), h.Conn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Close(context.Background()) })
	s, err := Start(t.Context(), h.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func placeOrder(t *testing.T, h *acemqtest.Harness, o Order) {
	t.Helper()
	if _, err := acemq.NewPublisher[Order](h.Conn(), "orders", "order.placed", acemq.PublisherConfig{}).Send(t.Context(), o); err != nil {
		t.Fatal(err)
	}
}

func TestAnOrderIsDeadLetteredAfterSixAttemptsWhilePaymentsIsDown(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		payments := acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			return Charge{}, errors.New("payments is down")
		})
		start(t, h)
		began := h.Now()
		placeOrder(t, h, Order{ID: "o-1", Card: "4111", Cents: 1250})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		retried := h.Expect(t, acemqtest.Retried, 5, acemqtest.Queue("orders.new"))
		for i, r := range retried {
			if want := Retry.Schedule()[i]; r.RetryDelay != want {
				t.Errorf("retry %d waited %s, want %s", i+1, r.RetryDelay, want)
			}
		}
		h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Queue("orders.new"), acemqtest.Reason("exhausted 6 attempts"))
		h.Expect(t, acemqtest.Scheduled, 0)
		if n := len(payments.Requests()); n != 6 {
			t.Errorf("payments was asked %d times, want once per attempt", n)
		}
		t.Logf("%s of virtual time", h.Now().Sub(began))
	})
}

func TestADeclinedCardIsRejectedAtOnce(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			return Charge{Approved: false, Reason: "insufficient funds"}, nil
		})
		start(t, h)
		placeOrder(t, h, Order{ID: "o-2", Card: "4000", Cents: 99_00})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Retried, 0)
		dead := h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Queue("orders.new"), acemqtest.Reason("insufficient funds"))
		if dead[0].Outcome != acemq.ConsumeRejected || dead[0].Envelope.Attempt != 1 {
			t.Errorf("the declined order: %s at attempt %d, want rejected at its first", dead[0].Outcome, dead[0].Envelope.Attempt)
		}
	})
}

func TestAPaidOrderIsRemindedAnHourAfterItsPayment(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		calls := 0
		acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			if calls++; calls == 1 {
				return Charge{}, errors.New("payments timed out")
			}
			return Charge{Approved: true}, nil
		})
		s := start(t, h)
		placeOrder(t, h, Order{ID: "o-3", Card: "4111", Cents: 500})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		paid := h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"), acemqtest.Attempt(2))
		due := h.Expect(t, acemqtest.Scheduled, 1, acemqtest.RoutingKey("order.remind"))
		if want := paid[0].At.Add(ReminderDelay); due[0].DueAt.Sub(want).Abs() > time.Millisecond {
			t.Errorf("the reminder is due %s, want an hour after the payment at %s", due[0].DueAt, paid[0].At)
		}
		reminded := h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.reminders"))
		if late := reminded[0].At.Sub(due[0].DueAt); late < -time.Second || late > time.Second {
			t.Errorf("the reminder was handled %s from its due time", late)
		}
		if n := s.Reminded.Load(); n != 1 {
			t.Errorf("%d reminders handled, want 1", n)
		}
	})
}

func TestAnOrderIsChargedOnceMoreWhenTheConnectionDropsAsItsReplyIsSent(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: Topology()}, func(t *testing.T, h *acemqtest.Harness) {
		payments := acemqtest.Respond(h, "payments", "charge", func(ctx context.Context, o Order) (Charge, error) {
			return Charge{Approved: true}, nil
		})
		start(t, h)
		// The third publish from here meets a connection loss and never
		// arrives: the order, the request, then the reply.
		h.Broker().DropConnectionsAtPublish(3)
		placeOrder(t, h, Order{ID: "o-4", Card: "4111", Cents: 700})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		// At least once: the loss hands both the request and the order back
		// to their queues. Payments answers the request again (its reply
		// finds no caller waiting), and the order's handler runs again and
		// asks once more. A real payments service must be idempotent on the
		// order id.
		if n := len(payments.Requests()); n != 3 {
			t.Errorf("payments was asked %d times, want three: before the loss, its redelivery, the order's second run", n)
		}
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"))
		h.Expect(t, acemqtest.Scheduled, 1)
	})
}
