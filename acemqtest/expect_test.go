package acemqtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
)

// fatalT records what Expect would fail a test with.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestExpectSaysWhatHappenedInstead(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{Topology: ordersTopology()}, func(t *testing.T, h *acemqtest.Harness) {
		consume(t, h, "orders.new", acemq.ConsumerConfig{Retry: acemq.Fixed(3, 0)}, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			if m.Payload.ID == "o-2" {
				return acemq.Park(errors.New("over the fraud limit"))
			}
			return acemq.Retry(errors.New("card declined"))
		})
		for _, id := range []string{"o-1", "o-2"} {
			send(t, h, "orders", "order.created", order{ID: id})
			if err := h.Settle(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		f := &fatalT{TB: t}
		if got := h.Expect(f, acemqtest.Published, 1, acemqtest.Type("order.placed"), acemqtest.Exchange("orders")); len(got) != 0 {
			t.Fatalf("Expect returned %d records for a type never published", len(got))
		}
		t.Log(f.msg)
		for _, want := range []string{
			"acemqtest: expected 1 message published of type order.placed on exchange orders, saw 0\nwhat happened:\n",
			"  published: 2 (order.created on exchange orders key order.created ×2)\n",
			"  consumed: 4 (orders.new retried ×2, orders.new dead_lettered ×1, orders.new parked ×1)\n",
			"  dead-lettered: 1 (orders.new: exhausted 3 attempts: card declined ×1)\n",
			"  parked: 1 (orders.new: the handler parked it: over the fraud limit ×1)\n",
			"records, in order:\n",
			"consumed      order.created attempt 3 from orders.new: dead_lettered → orders.new.dlq (exhausted 3 attempts: card declined)",
		} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("the failure message does not say %q", want)
			}
		}
		f = &fatalT{TB: t}
		h.Expect(f, acemqtest.Retried, 2, acemqtest.Queue("orders.new"))
		h.Expect(f, acemqtest.Consumed, 2, acemqtest.Where("for o-1 at attempt 1 or 2", func(r acemqtest.Record) bool {
			return strings.Contains(string(r.Body), `"o-1"`) && r.Envelope.Attempt < 3
		}))
		if f.msg != "" {
			t.Errorf("a matching Expect failed: %s", f.msg)
		}
	})
}

func TestExpectOnNothingSaysNothingHappened(t *testing.T) {
	acemqtest.Run(t, acemqtest.Config{}, func(t *testing.T, h *acemqtest.Harness) {
		f := &fatalT{TB: t}
		h.Expect(f, acemqtest.Consumed, 2, acemqtest.Queue("orders.new"))
		if want := "acemqtest: expected 2 messages consumed on queue orders.new, saw 0\nnothing happened: no message was published or consumed (did the test Settle?)"; f.msg != want {
			t.Errorf("message\n got %q\nwant %q", f.msg, want)
		}
	})
}
