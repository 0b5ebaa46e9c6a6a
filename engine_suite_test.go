package acemq_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport/memory"
)

// engine is one test's Conn on one transport, for the tests that say the
// same thing about memory:// and RabbitMQ (as watermill's shared pub/sub
// tests do): the engine's promises do not depend on the broker.
type engine struct {
	c    *acemq.Conn
	log  *eventLog
	name string
	// unique makes a queue or exchange name no other test uses.
	unique func(prefix string) string
	// drop closes every connection from the broker's side.
	drop func()
	// another opens a second Conn to the same broker, with an event log of
	// its own, closed at cleanup.
	another func(t *testing.T, opts ...acemq.Config) (*acemq.Conn, *eventLog)
}

// onEveryTransport runs fn on memory:// and on the RabbitMQ node of `make
// test` (skipped, or failed under ACEMQ_REQUIRE_SERVICES, when it is not
// running).
func onEveryTransport(t *testing.T, fn func(t *testing.T, e *engine), opts ...acemq.Config) {
	t.Run("memory", func(t *testing.T) {
		log := newEventLog()
		name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + itoa(brokerSeq.Add(1))
		all := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler), OnEvent: log.add}, opts...)
		c, err := acemq.Connect(context.Background(), "memory://"+name, all)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_ = c.Close(ctx)
			memory.Delete(name)
		})
		b := memory.Lookup(name)
		another := func(t *testing.T, opts ...acemq.Config) (*acemq.Conn, *eventLog) {
			t.Helper()
			log := newEventLog()
			all := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler), OnEvent: log.add}, opts...)
			c, err := acemq.Connect(context.Background(), "memory://"+name, all)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				_ = c.Close(ctx)
			})
			return c, log
		}
		fn(t, &engine{c: c, log: log, name: "memory", unique: func(p string) string { return p }, drop: b.DropConnections, another: another})
	})
	t.Run("rabbitmq", func(t *testing.T) {
		c, log := rabbit(t, opts...)
		fn(t, &engine{c: c, log: log, name: "rabbitmq", unique: testenv.Unique, drop: func() {
			testenv.RabbitCtl(t, "close_all_connections", "test")
		}, another: rabbit})
	})
}

func TestRecoverySkipsARefusedRedeclarationAndRestoresTheRest(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		changed, lost, ex := e.unique("changed"), e.unique("lost"), e.unique("ex")
		tp := acemq.NewTopology().
			Exchange(ex, acemq.Direct, acemq.ExchangeOptions{}).
			Queue(changed, acemq.QueueOptions{Type: acemq.Classic}).
			Queue(lost, acemq.QueueOptions{Type: acemq.Classic}).
			Bind(lost, ex, "k")
		if err := e.c.Apply(ctx, tp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if e.name == "rabbitmq" {
				deleteQueues(t, changed, lost)
			}
		})
		// Behind the Conn's back: one queue comes back with other
		// arguments (the recovery's re-declaration is refused, 406), the
		// other is gone (the recovery re-creates it and its binding).
		for _, q := range []string{changed, lost} {
			if _, err := e.c.DeleteQueue(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		other := acemq.NewTopology().Queue(changed, acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": int64(5)}})
		if err := e.c.Apply(ctx, other); err != nil {
			t.Fatal(err)
		}
		from := e.log.mark()
		e.drop()
		rec := e.log.wait(t, acemq.EventRecovered, from, 30*time.Second)
		if len(rec.Skipped) != 1 || !strings.Contains(rec.Skipped[0].Error(), changed) || !strings.Contains(rec.Skipped[0].Error(), "406") {
			t.Fatalf("skipped %v, want one 406 refusal naming %s", rec.Skipped, changed)
		}
		if _, err := acemq.NewPublisher[item](e.c, ex, "k", acemq.PublisherConfig{}).SendWith(ctx, item{N: 1}, acemq.SendOptions{Mandatory: true}); err != nil {
			t.Fatalf("publish through the restored binding: %v", err)
		}
		info, err := e.c.QueueInfo(ctx, lost)
		if err != nil || info.Messages != 1 {
			t.Fatalf("%s after the recovery: %+v, %v; want it re-created with the message routed to it", lost, info, err)
		}
	})
}

// A consumer's channel opens while the recovery re-declares, but it
// subscribes only once every declaration is back: a consumer of an
// exclusive queue (which the loss deleted) reads again at the recovered
// event, instead of stalling on a 404 and waiting for its re-subscriber.
func TestRecoveryReattachesAConsumerOnlyAfterItsQueueIsRedeclared(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		q := e.unique("mine")
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Exclusive: true})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if e.name == "rabbitmq" {
				deleteQueues(t, q+".dlq", q+".parked")
			}
		})
		got := make(chan int, 1)
		k, err := acemq.Consume(ctx, e.c, q, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
			got <- m.Payload.N
			return acemq.Accept()
		}, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		from := e.log.mark()
		e.drop()
		rec := e.log.wait(t, acemq.EventRecovered, from, 30*time.Second)
		t.Logf("recovered after %s (attempt %d)", rec.Gap, rec.Attempt)
		if st := e.c.Health(ctx).Stalled; len(st) != 0 {
			t.Fatalf("stalled at the recovered event: %v; want the consumer of %s reading again", st, q)
		}
		if _, err := acemq.NewPublisher[item](e.c, "", q, acemq.PublisherConfig{}).Send(ctx, item{N: 7}); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-got:
			if n != 7 {
				t.Fatalf("got %d, want 7", n)
			}
		case <-time.After(waitLimit):
			t.Fatal("the consumer did not read after the recovery")
		}
	})
}

// The broker cancels a consumer whose queue is deleted; a recovery while
// the queue is missing does not fail because of it, and the consumer reads
// again once the queue is back.
func TestConsumerOfADeletedQueueResumesAfterARecoveryWithoutIt(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		admin, adminLog := e.another(t, acemq.Config{RecoveryInterval: 100 * time.Millisecond, RecoveryIntervalMax: 400 * time.Millisecond})
		ctx := context.Background()
		q := e.unique("engine.deleted")
		if err := admin.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if e.name == "rabbitmq" {
				deleteQueues(t, q, q+".dlq", q+".parked")
			}
		})
		got := make(chan string, 10)
		if _, err := acemq.Consume(ctx, e.c, q, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
			got <- m.Envelope.ID
			return acemq.Accept()
		}, acemq.ConsumerConfig{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.DeleteQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
		from, adminFrom := e.log.mark(), adminLog.mark()
		e.drop()
		rec := e.log.wait(t, acemq.EventRecovered, from, 30*time.Second)
		adminLog.wait(t, acemq.EventRecovered, adminFrom, 30*time.Second)
		t.Logf("recovered with the queue missing (attempt %d)", rec.Attempt)
		if err := admin.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
			t.Fatal(err)
		}
		var sent acemq.Sent
		eventually(t, 15*time.Second, "the consumer reading the re-created queue", func() bool {
			var err error
			if sent, err = admin.Publish(ctx, "", q, item{1}, acemq.SendOptions{}); err != nil {
				return false
			}
			select {
			case id := <-got:
				return id == sent.Envelope.ID
			case <-time.After(500 * time.Millisecond):
				return false
			}
		})
	}, acemq.Config{RecoveryInterval: 100 * time.Millisecond, RecoveryIntervalMax: 400 * time.Millisecond})
}
