package acemqtest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
)

// billing is where the service publishes what it did.
func billing() *acemq.Topology {
	return ordersTopology().
		Exchange("billing", acemq.Direct, acemq.ExchangeOptions{}).
		Queue("billing.paid", acemq.QueueOptions{}).
		Bind("billing.paid", "billing", "order.paid")
}

// payOnce is the service's handler: it publishes order.paid for each order.
func payOnce(h *acemqtest.Harness, runs *atomic.Int64) acemq.Handler[order] {
	paid := acemq.NewPublisher[order](h.Conn(), "billing", "order.paid", acemq.PublisherConfig{})
	return func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		runs.Add(1)
		if _, err := paid.Send(ctx, m.Payload); err != nil {
			return acemq.Retry(err)
		}
		return acemq.Accept()
	}
}

func TestSettleWaitsOutAConnectionLostAtTheNthPublish(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: billing()}, func(t *testing.T, h *acemqtest.Harness) {
		var runs atomic.Int64
		consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: acemq.Fixed(3, time.Second)}, payOnce(h, &runs))
		// The first publish is the order; the second, the handler's, meets
		// the loss and is never routed.
		h.Broker().DropConnectionsAtPublish(2)
		send(t, h, "orders", "order.placed", order{ID: "o-1"})
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Once meeting the loss, once after the recovery, and once more if
		// the redelivery came before publishing had reopened (consumers
		// are re-attached first; the refused send is retried).
		if n := runs.Load(); n < 2 || n > 3 {
			t.Errorf("the handler ran %d times, want twice (three times at most)", n)
		}
		h.Expect(t, acemqtest.Published, 1, acemqtest.Exchange("billing"), acemqtest.Queue("billing.paid"))
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"))
		if h := h.Conn().Health(t.Context()); !h.Open {
			t.Errorf("after Settle the Conn is %s: %s", h.Status, h.Detail)
		}
	})
}

func TestSettleNamesWithheldConfirmsUntilTheBrokerResumes(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: billing(), Conn: acemq.Config{ConfirmTimeout: 5 * time.Second}}, func(t *testing.T, h *acemqtest.Harness) {
		h.Broker().StopConfirming()
		sent := make(chan error, 1)
		go func() {
			_, err := acemq.NewPublisher[order](h.Conn(), "billing", "order.paid", acemq.PublisherConfig{}).Send(t.Context(), order{ID: "o-1"})
			sent <- err
		}()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := h.Settle(ctx)
		if err == nil || !strings.Contains(err.Error(), "1 publishes whose confirms the broker withholds (StopConfirming) until ResumeConfirming") {
			t.Fatalf("Settle: %v, want the withheld confirm named", err)
		}
		var pe *acemq.PublishError
		if err := <-sent; !errors.As(err, &pe) || !pe.Sent {
			t.Fatalf("the send: %v, want a may-have-arrived failure after the 5 s confirm timeout", err)
		}
		h.Broker().ResumeConfirming()
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Published, 1, acemqtest.Queue("billing.paid"))
	})
}

func TestSettleWaitsForABlockedPublishUntilUnblock(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: billing()}, func(t *testing.T, h *acemqtest.Harness) {
		var runs atomic.Int64
		consume(t, h, "orders.new", acemq.ConsumerConfig{}, payOnce(h, &runs))
		send(t, h, "orders", "order.placed", order{ID: "o-1"})
		h.SettleNow()
		h.Broker().Block("low on memory")
		go func() {
			_, _ = acemq.NewPublisher[order](h.Conn(), "orders", "order.placed", acemq.PublisherConfig{}).Send(context.Background(), order{ID: "o-2"})
		}()
		h.SettleNow()
		p, err := h.Pending(t.Context())
		if err != nil || !strings.Contains(strings.Join(p, "; "), "1 publishes held by the broker's alarm (Block) until Unblock") {
			t.Fatalf("pending %q, %v: want the held publish", p, err)
		}
		h.Broker().Unblock()
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Published, 2, acemqtest.Exchange("billing"))
	})
}
