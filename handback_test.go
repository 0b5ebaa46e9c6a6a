package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// Every delivery the engine hands back to the broker goes back by
// basic.reject with requeue, which every RabbitMQ version counts toward a
// quorum queue's x-delivery-count and delivery limit. RabbitMQ 4.3 does
// not count a basic.nack (memory:// counts as 4.3 does), so a message the
// engine kept handing back by nack was never ended by the limit there.

// wiredQuorum declares a quorum queue with the library's dead-letter
// wiring and the given delivery limit (0: the broker's default).
func wiredQuorum(r *rig, prefix string, limit int) string {
	r.t.Helper()
	q := r.named(prefix)
	tp := acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, DeliveryLimit: limit}).DeadLetters(q)
	if err := r.c.Apply(context.Background(), tp); err != nil {
		r.t.Fatal(err)
	}
	return q
}

// brokerCount is a delivery's x-delivery-count as the broker wrote it (0
// when absent).
func brokerCount(h map[string]any) int64 {
	n, _ := wire.Int(h["x-delivery-count"])
	return n
}

// A handler that returns Release for ever: the delivery limit (2) ends it
// in {q}.dlq after 3 deliveries, with the broker's reason delivery_limit.
func TestReleaseIsCountedTowardTheDeliveryLimit(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := wiredQuorum(r, "release", 2)
		var calls atomic.Int32
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			calls.Add(1)
			return acemq.Release()
		})
		sent := r.send(q, order{ID: "poison"})
		m := r.pull(q + ".dlq")
		if m.Envelope.ID != sent.Envelope.ID || m.Headers["x-first-death-reason"] != "delivery_limit" {
			t.Fatalf("%s.dlq holds %s dead-lettered for %v, want %s for delivery_limit", q, m.Envelope.ID, m.Headers["x-first-death-reason"], sent.Envelope.ID)
		}
		r.waitReady(q, 0)
		if n := calls.Load(); n != 3 {
			t.Fatalf("the handler ran %d times, want 3 (delivery limit 2)", n)
		}
	})
}

// Close hands back what the consumer prefetched and never started: each
// of those comes back counted once.
func TestADrainHandsBackWhatItNeverStartedCounted(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := wiredQuorum(r, "drain", 0)
		started := make(chan struct{}, 10)
		k, err := acemq.Consume(context.Background(), r.c, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			started <- struct{}{}
			if m.Payload.ID == "a" {
				<-ctx.Done() // held until the drain gives up on it
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 5, DrainTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			r.send(q, order{ID: id})
		}
		recv(t, started)
		deadline := time.Now().Add(waitLimit)
		for k.InFlight() != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("in flight %d, want all 3 prefetched", k.InFlight())
			}
			time.Sleep(time.Millisecond) // no event for prefetch arrival
		}
		_ = k.Close(context.Background()) // "a" returns Accept in the drain's grace
		for range 2 {
			m := r.pull(q)
			if n := brokerCount(m.Headers); n != 1 {
				t.Fatalf("%s came back with x-delivery-count %d, want 1: the hand-back was not counted", payloadOf(m), n)
			}
		}
	})
}

// A message whose copies are refused on a queue without dead-letter
// wiring is held 5 s and handed back: counted, so a quorum queue's
// delivery limit ends the loop.
func TestAMessageThatCannotBeSetAsideIsHandedBackCounted(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("unplaced")
		if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
			t.Fatal(err)
		}
		counts := make(chan int64, 10)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			v, _ := m.Envelope.Header("x-delivery-count")
			n, _ := wire.Int(v)
			counts <- n
			return acemq.Reject(errors.New("no"))
		}, acemq.ConsumerConfig{NoDeadLetterDeclaration: true}) // neither {q}.dlq nor {q}.parked exists
		r.send(q, order{ID: "nowhere"})
		if n := recv(t, counts); n != 0 {
			t.Fatalf("the first delivery carries x-delivery-count %d", n)
		}
		if n := recv(t, counts); n != 1 {
			t.Fatalf("handed back after its copies were refused, it came back with x-delivery-count %d, want 1", n)
		}
	})
}

// payloadOf is a pulled message's body, for failure messages.
func payloadOf(m *acemq.Pulled) string { return fmt.Sprintf("%s %s", m.Envelope.ID, m.Body) }

// Message.DeliveryCount is how many times the broker delivered the message
// before and got it back, however it came back. RabbitMQ 4.3 (and
// memory://) count a basic.nack only in x-acquired-count, not in
// x-delivery-count: after a nack, a reject and a closed channel the
// handler saw 2 there.
func TestDeliveryCountCountsEveryReturnOnEveryBroker(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		q := wiredQuorum(r, "count", 0)
		r.send(q, order{ID: "counted"})
		take := func() (transport.Channel, transport.Delivery) {
			t.Helper()
			ch, err := r.c.Channel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(waitLimit)
			for {
				d, ok, err := ch.Get(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					return ch, d
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing arrived in %s", q)
				}
				time.Sleep(2 * time.Millisecond) // polling basic.get: no event exists
			}
		}
		ch, d := take()
		if err := ch.Nack(d.DeliveryTag, true); err != nil {
			t.Fatal(err)
		}
		if err := ch.Close(); err != nil {
			t.Fatal(err)
		}
		ch, d = take()
		if err := ch.Reject(d.DeliveryTag, true); err != nil {
			t.Fatal(err)
		}
		_ = ch.Close()
		ch, _ = take()
		_ = ch.Close() // unacked: back, counted

		got := make(chan *acemq.Message[order], 1)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			got <- m
			return acemq.Accept()
		})
		if m := recv(t, got); m.DeliveryCount != 3 || !m.Redelivered {
			t.Fatalf("the handler saw delivery count %d (redelivered %v); want 3: a nack, a reject and a closed channel", m.DeliveryCount, m.Redelivered)
		}
	})
}

// A poison message that kills its consumer each time (here: every
// connection closed from the broker's side while the handler holds it, as
// a consumer process that crashes leaves it) comes back counted on every
// broker version, so a quorum queue's delivery limit ends it in {q}.dlq
// after limit+1 deliveries instead of looping.
func TestAPoisonMessageThatKillsItsConsumerEndsInTheDLQ(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		const limit = 3
		q := wiredQuorum(r, "poison", limit)
		started := make(chan struct{}, 10)
		var calls atomic.Int32
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			calls.Add(1)
			started <- struct{}{}
			<-ctx.Done() // the consumer dies with the message in hand
			return acemq.Accept()
		})
		sent := r.send(q, order{ID: "poison"})
		for range limit + 1 {
			recv(t, started)
			if r.rabbit {
				testenv.RabbitCtl(t, "close_all_connections", "poison message test")
			} else {
				r.broker.DropConnections()
			}
		}
		m := pullThroughRecovery(r, q+".dlq")
		if m.Envelope.ID != sent.Envelope.ID || m.Headers["x-first-death-reason"] != "delivery_limit" {
			t.Fatalf("%s.dlq holds %s dead-lettered for %v, want %s for delivery_limit", q, m.Envelope.ID, m.Headers["x-first-death-reason"], sent.Envelope.ID)
		}
		r.waitReady(q, 0)
		if n := calls.Load(); n != limit+1 {
			t.Fatalf("the handler ran %d times, want %d (delivery limit %d)", n, limit+1, limit)
		}
	}, acemq.Config{RecoveryInterval: 20 * time.Millisecond})
}

// pullThroughRecovery takes one message from q and acks it, waiting until
// one is there and through a recovery of the rig's Conn (a Puller of the
// lost connection fails; the next one is opened on the recovered one).
func pullThroughRecovery(r *rig, q string) *acemq.Pulled {
	r.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(waitLimit)
	for {
		if p, err := r.c.NewPuller(ctx); err == nil {
			m, ok, err := p.Pull(ctx, q)
			if err == nil && ok {
				err = m.Ack()
			}
			_ = p.Close()
			if err == nil && ok {
				return m
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("nothing arrived in %s", q)
		}
		time.Sleep(5 * time.Millisecond) // polling through a recovery: no event to wait on
	}
}

// The broker's own headers stay with the delivery they describe: a copy
// the library makes (here the dead-letter copy of a rejected message that
// came back twice) carries none of them. RabbitMQ 4.3 and memory:// write
// x-acquired-count, and pass one a publisher set through untouched on a
// classic queue (and on a quorum queue's first delivery), so a copy that
// kept it would show its next handler a delivery count the copy never had.
func TestTheBrokersCountsDoNotTravelOnTheLibrarysCopies(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		q := wiredQuorum(r, "owned", 0)
		r.send(q, order{ID: "counted"})
		for range 2 {
			ch, err := r.c.Channel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var d transport.Delivery
			deadline := time.Now().Add(waitLimit)
			for {
				var ok bool
				if d, ok, err = ch.Get(ctx, q); err != nil {
					t.Fatal(err)
				} else if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing arrived in %s", q)
				}
				time.Sleep(2 * time.Millisecond) // polling basic.get: no event exists
			}
			if err := ch.Nack(d.DeliveryTag, true); err != nil {
				t.Fatal(err)
			}
			_ = ch.Close()
		}
		seen := make(chan int, 1)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			seen <- m.DeliveryCount
			return acemq.Reject(errors.New("no"))
		})
		if n := recv(t, seen); n != 2 {
			t.Fatalf("the handler saw delivery count %d, want 2", n)
		}
		m := r.pull(acemq.DeadLetterQueue(q))
		for _, h := range []string{"x-delivery-count", "x-acquired-count"} {
			if v, ok := m.Headers[h]; ok {
				t.Errorf("the dead-letter copy carries the broker's %s %v from the delivery it was made from", h, v)
			}
		}
	})
}
