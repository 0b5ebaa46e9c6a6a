package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The RabbitMQ 4 behaviours of behaviour §3.13, each asserted on the node
// `make test` points at: the 3.10 pass shows what RabbitMQ 3 does, the 4.0
// pass (every deprecated feature denied) what RabbitMQ 4 does. What differs
// between them is listed in docs/support.md.

// quorumWithDeadLetters applies a quorum queue with the library's
// dead-letter wiring (Topology.DeadLetters) and deletes it at cleanup.
func quorumWithDeadLetters(t *testing.T, c *acemq.Conn, prefix string, o acemq.QueueOptions) string {
	t.Helper()
	q := testenv.Unique(prefix)
	o.Type = acemq.Quorum
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, o).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueues(t, q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)) })
	return q
}

// getOne waits for one message on queue with basic.get (no ack), or
// returns false when none comes within a few seconds.
func getOne(t *testing.T, ch *amqp.Channel, queue string) (amqp.Delivery, bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("basic.get on %s: %v", queue, err)
		}
		if ok || time.Now().After(deadline) {
			return d, ok
		}
		time.Sleep(20 * time.Millisecond) // polling basic.get: no event to wait on
	}
}

// releaseUntilGone consumes queue with the library, the handler handing the
// one message on it back (Release, a basic.reject with requeue) each time,
// until the broker stops offering it (it dead-lettered it into {q}.dlq) or
// max deliveries have been made; the max-th is held until the consumer is
// closed. It returns how many deliveries there were.
func releaseUntilGone(t *testing.T, c *acemq.Conn, queue string, max int) int {
	t.Helper()
	ctx := context.Background()
	var n atomic.Int32
	enough := make(chan struct{})
	k, err := acemq.Consume(ctx, c, queue, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
		if n.Add(1) == int32(max) {
			close(enough)
			<-ctx.Done() // held: the close returns it
		}
		return acemq.Release()
	}, acemq.ConsumerConfig{DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for gone := false; !gone; {
		select {
		case <-enough:
			gone = true
		default:
			info, err := c.QueueInfo(ctx, acemq.DeadLetterQueue(queue))
			if err != nil {
				t.Fatal(err)
			}
			gone = info.Messages > 0
			if time.Now().After(deadline) {
				t.Fatalf("after %d deliveries the message was neither dead-lettered nor offered %d times within 30s", n.Load(), max)
			}
			time.Sleep(5 * time.Millisecond) // polling the dlq's depth: no event exists
		}
	}
	_ = k.Close(ctx)
	return int(n.Load())
}

// TestRabbitQuorumDefaultDeliveryLimitDeadLettersIntoTheLibrarysQueue: the
// library writes no x-delivery-limit unless asked (arguments are contract,
// and an existing queue cannot change them), so RabbitMQ 4's default of 20
// applies to a quorum queue declared without QueueOptions.DeliveryLimit: the
// message the library hands back a 21st time (Release, a basic.reject,
// which every version counts; RabbitMQ 4.3 does not count a basic.nack)
// goes, with the library's dead-letter wiring, into {q}.dlq (x-death
// reason delivery_limit) rather than vanishing. RabbitMQ 3 has no default
// limit: the message stays on q.
func TestRabbitQuorumDefaultDeliveryLimitDeadLettersIntoTheLibrarysQueue(t *testing.T) {
	c, _ := rabbit(t)
	ctx := context.Background()
	q := quorumWithDeadLetters(t, c, "rmq4.limit", acemq.QueueOptions{})
	sent, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	const tries = 30
	deliveries := releaseUntilGone(t, c, q, tries)
	ch := testenv.RawChannel(t, testenv.AMQPURL(t))
	if testenv.RabbitMajor(t) < 4 {
		if deliveries != tries {
			t.Fatalf("RabbitMQ 3 stopped offering the message after %d deliveries; it has no default delivery limit", deliveries)
		}
		if _, ok, err := ch.Get(acemq.DeadLetterQueue(q), true); err != nil || ok {
			t.Fatalf("RabbitMQ 3 dead-lettered a message with no delivery limit (ok %v, err %v)", ok, err)
		}
		return
	}
	// Delivered with x-delivery-count absent, then 1..20: 21 deliveries,
	// and the 21st return is over the limit of 20.
	if deliveries != 21 {
		t.Fatalf("RabbitMQ 4 offered the message %d times, want 21 (its default delivery limit is 20 returns)", deliveries)
	}
	d, ok := getOne(t, ch, acemq.DeadLetterQueue(q))
	if !ok {
		t.Fatalf("the message dropped at RabbitMQ 4's delivery limit is not in %s: it vanished", acemq.DeadLetterQueue(q))
	}
	if d.MessageId != sent.Envelope.ID || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Fatalf("%s holds message %q dead-lettered for %v, want %q for delivery_limit", acemq.DeadLetterQueue(q), d.MessageId, d.Headers["x-first-death-reason"], sent.Envelope.ID)
	}
	_ = d.Ack(false)
}

// TestRabbitQuorumDeliveryLimitSetByTheLibraryHoldsOnBothVersions: an
// explicit QueueOptions.DeliveryLimit is the count of returns the broker
// allows on every version: with 2, the third time the library hands the
// message back sends it to {q}.dlq.
func TestRabbitQuorumDeliveryLimitSetByTheLibraryHoldsOnBothVersions(t *testing.T) {
	c, _ := rabbit(t)
	ctx := context.Background()
	q := quorumWithDeadLetters(t, c, "rmq4.limit2", acemq.QueueOptions{DeliveryLimit: 2})
	if _, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{N: 1}); err != nil {
		t.Fatal(err)
	}
	if n := releaseUntilGone(t, c, q, 10); n != 3 {
		t.Fatalf("with delivery limit 2 the message was offered %d times, want 3", n)
	}
	ch := testenv.RawChannel(t, testenv.AMQPURL(t))
	if d, ok := getOne(t, ch, acemq.DeadLetterQueue(q)); !ok || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Fatalf("the message over its delivery limit is not in %s with reason delivery_limit (found %v, %v)", acemq.DeadLetterQueue(q), ok, d.Headers["x-first-death-reason"])
	}
}

// TestRabbitDeliveryCountReachesTheHandlerAsTheBrokerCountsIt: a quorum
// queue's count of returns reaches the handler as Message.DeliveryCount,
// read as the broker wrote it (3.10 writes x-delivery-count 0 on a first
// basic.get, 4.x nothing). RabbitMQ 3.10 to 4.2 count every return in
// x-delivery-count, whether a nack with requeue, a reject with requeue or
// a channel closed with the message unacked; 4.3 stops counting nacks
// there and counts every return in x-acquired-count, which the library
// reads instead (the engine decides nothing on either).
func TestRabbitDeliveryCountReachesTheHandlerAsTheBrokerCountsIt(t *testing.T) {
	c, _ := rabbit(t)
	ctx := context.Background()
	q := quorumWithDeadLetters(t, c, "rmq4.count", acemq.QueueOptions{})
	if _, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{N: 7}); err != nil {
		t.Fatal(err)
	}
	url := testenv.AMQPURL(t)
	ch := testenv.RawChannel(t, url)
	d, _ := getOne(t, ch, q)
	// A first delivery: RabbitMQ 3.10 writes x-delivery-count 0, 4.0 none.
	first, present := d.Headers["x-delivery-count"]
	if v4 := testenv.RabbitMajor(t) >= 4; v4 && present || !v4 && fmt.Sprint(first) != "0" {
		t.Fatalf("a first delivery carries x-delivery-count %v (present %v)", first, present)
	}
	_ = d.Nack(false, true)
	d, _ = getOne(t, ch, q)
	_ = d.Reject(true)
	// A channel closed with the message unacked hands it back too.
	closing := testenv.RawChannel(t, url)
	if _, ok := getOne(t, closing, q); !ok {
		t.Fatal("the message did not come back after a reject")
	}
	_ = closing.Close()

	got := make(chan *acemq.Message[item], 1)
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
		got <- m
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	m := recv(t, got)
	if m.DeliveryCount != 3 || m.Payload.N != 7 || !m.Redelivered {
		t.Fatalf("the handler saw delivery count %d, payload %d, redelivered %v; want 3 (nack, reject, closed channel), 7, true", m.DeliveryCount, m.Payload.N, m.Redelivered)
	}
}

// TestApplyRefusesATransientNonExclusiveQueueBeforeTheBroker: RabbitMQ 4
// answers a non-durable, non-exclusive queue with 541, closing the whole
// connection (and 4.3 denies it by default); the library refuses such
// QueueOptions itself, on every transport, before anything is sent, so the
// Conn stays up and nothing is declared.
func TestApplyRefusesATransientNonExclusiveQueueBeforeTheBroker(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		q := e.unique("rmq4.transient")
		err := e.c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Transient: true}))
		var te *acemq.TopologyError
		if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), "acemq: ") || !strings.Contains(err.Error(), `queue "`+q+`" is transient but not exclusive`) {
			t.Fatalf("Apply of a transient non-exclusive queue: %v; want a TopologyError naming it", err)
		}
		if _, err := e.c.QueueInfo(ctx, q); transport.Code(err) != transport.CodeNotFound {
			t.Fatalf("the refused queue was declared after all (passive declare: %v)", err)
		}
		// The exclusive form is what RabbitMQ 4 allows, on the same Conn.
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Transient: true, Exclusive: true})); err != nil {
			t.Fatalf("an exclusive transient queue after the refusal: %v", err)
		}
		if r := e.c.Health(ctx); r.Status != acemq.StatusUp || !r.Open {
			t.Fatalf("health after the refusal %+v", r)
		}
	})
}

// TestRabbitDeliveryLimitMinusOneMeansNoneOnlyOnRabbitMQ4: RabbitMQ 4 reads
// x-delivery-limit -1 as no limit (the library's hand-backs, counted on
// every 4.x, never end it); RabbitMQ 3.10 reads it as a limit nothing
// meets, so the first return dead-letters the message (with the library's
// wiring it lands in {q}.dlq; without, it is dropped). 3.x has no default
// limit: leave QueueOptions.DeliveryLimit at 0 there (docs/support.md).
func TestRabbitDeliveryLimitMinusOneMeansNoneOnlyOnRabbitMQ4(t *testing.T) {
	c, _ := rabbit(t)
	ctx := context.Background()
	q := quorumWithDeadLetters(t, c, "rmq4.unlimited", acemq.QueueOptions{DeliveryLimit: -1})
	if _, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{N: 1}); err != nil {
		t.Fatal(err)
	}
	ch := testenv.RawChannel(t, testenv.AMQPURL(t))
	const tries = 25
	n := releaseUntilGone(t, c, q, tries)
	if testenv.RabbitMajor(t) >= 4 {
		if n != tries {
			t.Fatalf("with delivery limit -1 RabbitMQ 4 stopped offering the message after %d deliveries, want no limit", n)
		}
		return
	}
	if n != 1 {
		t.Fatalf("with delivery limit -1 RabbitMQ 3 offered the message %d times, want 1", n)
	}
	if d, ok := getOne(t, ch, acemq.DeadLetterQueue(q)); !ok || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Fatalf("RabbitMQ 3's delivery limit -1 did not dead-letter into %s (found %v, %v)", acemq.DeadLetterQueue(q), ok, d.Headers["x-first-death-reason"])
	}
}
