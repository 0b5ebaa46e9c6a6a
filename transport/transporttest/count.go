package transporttest

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// A quorum queue counts the times a message came back: x-delivery-count,
// the count its delivery limit is measured by, and (RabbitMQ 4.3 and
// memory://) x-acquired-count, every earlier delivery however it ended.
// What each version counts is measured in docs/support.md.

// quorumQueue declares a durable quorum queue with args, deleted at
// cleanup (with dlq, when given, a classic queue it dead-letters into).
func quorumQueue(t *testing.T, c transport.Connection, ch transport.Channel, prefix string, args transport.Table) string {
	t.Helper()
	name := unique(prefix)
	a := transport.Table{"x-queue-type": "quorum"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Durable: true, Args: a}); err != nil {
		t.Fatalf("declare quorum queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cc, err := c.Channel(context.Background()); err == nil {
			_, _ = cc.DeleteQueue(context.Background(), name)
			_ = cc.Close()
		}
	})
	return name
}

// counts reads a delivery's x-delivery-count and x-acquired-count; an
// absent header reads 0 (RabbitMQ 3.10 writes x-delivery-count 0 on a
// first basic.get, later versions nothing).
func counts(d transport.Delivery) (delivery, acquired int64) {
	delivery, _ = wire.Int(d.Headers["x-delivery-count"])
	acquired, _ = wire.Int(d.Headers["x-acquired-count"])
	return delivery, acquired
}

// Each way a message comes back raises the counts the way the broker's
// version does: basic.reject with requeue and a channel closed with the
// message unacked raise x-delivery-count everywhere; basic.nack with
// requeue raises it only before RabbitMQ 4.3 (Harness.CountsNacks).
// x-acquired-count, where the broker writes it, counts every return.
func (s *suite) returnsAreCountedAsTheVersionCounts(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := quorumQueue(t, c, ch, "count", nil)
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "counted"))
	var wantDelivery int64
	back := []struct {
		how     string
		counted bool
		give    func(ch transport.Channel, d transport.Delivery) transport.Channel
	}{
		{"basic.nack with requeue", s.h.CountsNacks, func(ch transport.Channel, d transport.Delivery) transport.Channel {
			if err := ch.Nack(d.DeliveryTag, true); err != nil {
				t.Fatalf("nack: %v", err)
			}
			return ch
		}},
		{"basic.reject with requeue", true, func(ch transport.Channel, d transport.Delivery) transport.Channel {
			if err := ch.Reject(d.DeliveryTag, true); err != nil {
				t.Fatalf("reject: %v", err)
			}
			return ch
		}},
		{"a channel closed with it unacked", true, func(ch transport.Channel, _ transport.Delivery) transport.Channel {
			_ = ch.Close()
			return openChannel(t, c)
		}},
	}
	for i, b := range back {
		d := getOne(t, ch, q)
		got, acquired := counts(d)
		if got != wantDelivery || (s.h.AcquiredCount && acquired != int64(i)) || (!s.h.AcquiredCount && acquired != 0) {
			t.Fatalf("delivery %d: x-delivery-count %d, x-acquired-count %d; want %d and %d (x-acquired-count written: %v)", i+1, got, acquired, wantDelivery, i, s.h.AcquiredCount)
		}
		ch = b.give(ch, d)
		if b.counted {
			wantDelivery++
		}
	}
	d := getOne(t, ch, q)
	got, acquired := counts(d)
	if got != wantDelivery || (s.h.AcquiredCount && acquired != int64(len(back))) {
		t.Fatalf("after a nack, a reject and a closed channel: x-delivery-count %d, x-acquired-count %d; want %d and %d", got, acquired, wantDelivery, len(back))
	}
}

// A quorum queue with x-delivery-limit 2 dead-letters a message the third
// time it comes back counted (here by basic.reject and closed channels),
// with x-first-death-reason delivery_limit, on every version.
func (s *suite) deliveryLimitDeadLettersTheThirdCountedReturn(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	dlq := exclusiveQueue(t, ch, "limit-dlq", nil)
	q := quorumQueue(t, c, ch, "limit", transport.Table{"x-delivery-limit": int64(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "poison"))
	for i := range 3 {
		d := getOne(t, ch, q)
		if i%2 == 0 {
			if err := ch.Reject(d.DeliveryTag, true); err != nil {
				t.Fatalf("reject: %v", err)
			}
			continue
		}
		_ = ch.Close()
		ch = openChannel(t, c)
	}
	readyEventually(t, c, q, 0)
	d := getOne(t, ch, dlq)
	if string(d.Body) != "poison" || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Fatalf("%s holds %q dead-lettered for %v, want the message for delivery_limit", dlq, d.Body, d.Headers["x-first-death-reason"])
	}
}
