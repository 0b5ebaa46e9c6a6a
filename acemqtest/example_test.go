package acemqtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/schedule"
)

// The service under test: it takes orders from orders.new, asks the
// payments service for a charge, retries while payments fails, and
// schedules a reminder an hour later. Its topology, its handler and its
// start are what it runs in production.

type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

type Charge struct {
	OK bool `json:"ok"`
}

func Topology() *acemq.Topology {
	return acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Exchange("payments", acemq.Direct, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.placed")
}

func StartService(ctx context.Context, c *acemq.Conn) error {
	req, err := rpc.NewRequester(ctx, c)
	if err != nil {
		return err
	}
	_, err = acemq.Consume(ctx, c, "orders.new", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		charge, err := rpc.Request[Order, Charge](ctx, req, "payments", "charge", m.Payload)
		if err != nil {
			return acemq.Retry(err)
		}
		if !charge.OK {
			return acemq.Reject(errors.New("card declined"))
		}
		if err := schedule.After(ctx, c, "orders", "order.remind", m.Payload, time.Hour); err != nil {
			return acemq.Retry(err)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.Exponential(6, 10*time.Second, 5*time.Minute)})
	return err
}

// A service's test: payments fails for good, so the order goes through
// all six attempts (over five minutes of waits) to orders.new.dlq, in a
// few milliseconds.
func Example() {
	testPaymentsDown := func(t *testing.T) {
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
				t.Fatal(err) // names what is still in flight
			}

			h.Expect(t, acemqtest.Retried, 5, acemqtest.Queue("orders.new"))
			h.Expect(t, acemqtest.DeadLettered, 1, acemqtest.Reason("exhausted 6 attempts"))
			h.Expect(t, acemqtest.Scheduled, 0)
			if n := len(payments.Requests()); n != 6 {
				t.Errorf("payments was asked %d times, want 6", n)
			}
		})
	}
	_ = testPaymentsDown // a test function of the service's package
}
