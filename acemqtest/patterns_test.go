package acemqtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/schedule"
)

type quote struct {
	Cents int `json:"cents"`
}

// payments is the topology of the service the requests go to: only its
// exchange; the stub brings the queue.
func payments() *acemq.Topology {
	return ordersTopology().Exchange("payments", acemq.Direct, acemq.ExchangeOptions{})
}

func TestAStubAnswersTheServicesRequests(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: payments()}, func(t *testing.T, h *acemqtest.Harness) {
		stub := acemqtest.Respond(h, "payments", "payment.quote", func(ctx context.Context, o order) (quote, error) {
			if o.Cents < 0 {
				return quote{}, errors.New("a negative amount")
			}
			return quote{Cents: o.Cents + 30}, nil
		})
		req, err := rpc.NewRequester(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = req.Close(context.Background()) })
		got, err := rpc.Request[order, quote](t.Context(), req, "payments", "payment.quote", order{ID: "o-1", Cents: 100})
		if err != nil || got.Cents != 130 {
			t.Fatalf("request: %+v, %v", got, err)
		}
		_, err = rpc.Request[order, quote](t.Context(), req, "payments", "payment.quote", order{ID: "o-2", Cents: -1})
		var re *rpc.ResponderError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "a negative amount") {
			t.Fatalf("the stub's error reply: %v", err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r := stub.Requests(); len(r) != 2 || r[0].ID != "o-1" || r[1].ID != "o-2" {
			t.Fatalf("the stub saw %+v", r)
		}
		h.Expect(t, acemqtest.Published, 2, acemqtest.Exchange("payments"), acemqtest.RoutingKey("payment.quote"))
		h.Expect(t, acemqtest.Replied, 2, acemqtest.RoutingKey(req.ReplyQueue()))
		h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Queue(stub.Queue()), acemqtest.Reason("a negative amount"))
	})
}

func TestARequestTimesOutInVirtualTime(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: payments()}, func(t *testing.T, h *acemqtest.Harness) {
		// A queue nobody answers: the request waits there.
		if err := h.Conn().Apply(t.Context(), acemq.NewTopology().Queue("silent", acemq.QueueOptions{})); err != nil {
			t.Fatal(err)
		}
		req, err := rpc.NewRequester(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = req.Close(context.Background()) })
		start := h.Now()
		_, err = rpc.Request[order, quote](t.Context(), req, "", "silent", order{ID: "o-1"})
		if !errors.Is(err, rpc.ErrRequestTimedOut) {
			t.Fatalf("request: %v, want a timeout", err)
		}
		if waited := h.Now().Sub(start); waited != rpc.DefaultTimeout {
			t.Fatalf("the request waited %s of virtual time, want rpc.DefaultTimeout", waited)
		}
	})
}

func TestAScheduledMessageArrivesAnHourLater(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
			t.Fatal(err)
		}
		s, err := schedule.Start(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		consume(t, h, "orders.new", acemq.ConsumerConfig{}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			return acemq.Accept()
		})
		start := h.Now()
		if err := schedule.After(t.Context(), h.Conn(), "orders", "order.remind", order{ID: "o-1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		sch := h.Expect(t, acemqtest.Scheduled, 1, acemqtest.Exchange("orders"), acemqtest.RoutingKey("order.remind"))
		if due := sch[0].DueAt; !due.Equal(start.Add(time.Hour).Truncate(time.Millisecond)) {
			t.Errorf("due %s, want an hour after %s", due, start)
		}
		delivered := h.Expect(t, acemqtest.Published, 1, acemqtest.Exchange("orders"), acemqtest.RoutingKey("order.remind"))
		acked := h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue("orders.new"))
		late := delivered[0].At.Sub(sch[0].DueAt)
		if late < -time.Second || late > time.Second {
			t.Errorf("delivered %s from its due time; the scheduler promises within a second", late)
		}
		if !acked[0].At.Equal(delivered[0].At) {
			t.Errorf("consumed at %s, delivered at %s: nothing should wait between", acked[0].At, delivered[0].At)
		}
	})
}
