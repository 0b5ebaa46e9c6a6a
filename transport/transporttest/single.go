package transporttest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// Single active consumer (x-single-active-consumer), on classic and quorum
// queues alike: every basic.consume succeeds, only the first consumer
// receives; a basic.cancel makes the next one active at once (what the
// cancelled one holds stays unacked with its channel), while a channel or
// connection that ends first returns what it held, in order, to the next
// one. Measured on RabbitMQ 3.10.8 and 4.3.6 (docs/support.md).

// singleActiveQueue declares a durable single-active-consumer queue of
// type kind ("classic" or "quorum"), deleted at cleanup.
func singleActiveQueue(t *testing.T, c transport.Connection, ch transport.Channel, kind string) string {
	t.Helper()
	name := unique("sac-" + kind)
	args := transport.Table{"x-queue-type": kind, "x-single-active-consumer": true}
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Durable: true, Args: args}); err != nil {
		t.Fatalf("declare %s queue %s with x-single-active-consumer: %v", kind, name, err)
	}
	t.Cleanup(func() {
		if cc, err := c.Channel(context.Background()); err == nil {
			_, _ = cc.DeleteQueue(context.Background(), name)
			_ = cc.Close()
		}
	})
	return name
}

// subscriber is one consumer on a channel of its own with a prefetch.
type subscriber struct {
	ch  transport.Channel
	tag string
	ds  <-chan transport.Delivery
}

func subscribe(t *testing.T, c transport.Connection, q string, prefetch int) subscriber {
	t.Helper()
	ch := openChannel(t, c)
	if err := ch.Qos(prefetch); err != nil {
		t.Fatalf("qos: %v", err)
	}
	tag := unique("ctag")
	ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Tag: tag})
	if err != nil {
		t.Fatalf("consume %s: %v", q, err)
	}
	return subscriber{ch: ch, tag: tag, ds: ds}
}

// expectBodies takes len(want) deliveries and checks their bodies, in
// order, and their redelivered flags.
func expectBodies(t *testing.T, who string, ds <-chan transport.Delivery, redelivered bool, want ...string) []transport.Delivery {
	t.Helper()
	var got []transport.Delivery
	for _, w := range want {
		d := next(t, ds)
		if string(d.Body) != w || d.Redelivered != redelivered {
			t.Fatalf("%s got %q (redelivered %v) after %d deliveries, want %q (redelivered %v)", who, d.Body, d.Redelivered, len(got), w, redelivered)
		}
		got = append(got, d)
	}
	return got
}

func publishNumbered(t *testing.T, c transport.Connection, q string, n int) {
	t.Helper()
	p := openPublisher(t, c)
	for i := range n {
		publishAcked(t, p, toQueue(q, fmt.Sprint(i)))
	}
}

func eachSingleActiveKind(t *testing.T, kinds []string, fn func(t *testing.T, kind string)) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

var bothKinds = []string{"classic", "quorum"}

// Only the first consumer receives; a second basic.consume succeeds and
// waits. A passive declaration counts both consumers on a classic queue,
// only the active one on a quorum queue.
func (s *suite) singleActiveConsumerDeliversToTheFirstOnly(t *testing.T) {
	eachSingleActiveKind(t, bothKinds, func(t *testing.T, kind string) {
		c := s.dial(t)
		q := singleActiveQueue(t, c, openChannel(t, c), kind)
		a := subscribe(t, c, q, 2)
		b := subscribe(t, c, q, 2)
		publishNumbered(t, c, q, 6)
		expectBodies(t, "the active consumer", a.ds, false, "0", "1")
		none(t, b.ds)
		none(t, a.ds) // its prefetch is full
		readyEventually(t, c, q, 4)
		ch := openChannel(t, c)
		info, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true})
		if err != nil {
			t.Fatalf("passive declare: %v", err)
		}
		want := 2
		if kind == "quorum" {
			want = 1
		}
		if info.Consumers != want {
			t.Fatalf("a %s single-active-consumer queue with an active and a waiting consumer reports %d consumers, want %d", kind, info.Consumers, want)
		}
	})
}

// A basic.cancel of the active consumer makes the waiting one active at
// once: it receives the messages after what the cancelled one holds,
// which stays unacked with its channel; handed back later, those come
// after what the new active consumer already had (and, where a quorum
// queue puts returns behind the ready messages, after those too).
func (s *suite) singleActiveConsumerCancelActivatesTheNextAtOnce(t *testing.T) {
	kinds := bothKinds
	if s.h.ClassicSingleActiveCancelStalls {
		kinds = []string{"quorum"}
	}
	eachSingleActiveKind(t, kinds, func(t *testing.T, kind string) {
		c := s.dial(t)
		q := singleActiveQueue(t, c, openChannel(t, c), kind)
		a := subscribe(t, c, q, 2)
		b := subscribe(t, c, q, 2)
		publishNumbered(t, c, q, 6)
		held := expectBodies(t, "the active consumer", a.ds, false, "0", "1")
		if err := a.ch.Cancel(ctx(t), a.tag); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		got := expectBodies(t, "the next consumer, once the first was cancelled", b.ds, false, "2", "3")
		for _, d := range held {
			if err := a.ch.Reject(d.DeliveryTag, true); err != nil {
				t.Fatalf("reject after cancel: %v", err)
			}
		}
		readyEventually(t, c, q, 4)
		for _, d := range got {
			if err := b.ch.Ack(d.DeliveryTag); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		want := []string{"0r", "1r", "4", "5"}
		if kind == "quorum" && s.h.QuorumReturnsBehind {
			want = []string{"4", "5", "0r", "1r"}
		}
		var bodies []string
		for range want {
			d := next(t, b.ds)
			body := string(d.Body)
			if d.Redelivered {
				body += "r"
			}
			bodies = append(bodies, body)
			if err := b.ch.Ack(d.DeliveryTag); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		if fmt.Sprint(bodies) != fmt.Sprint(want) {
			t.Fatalf("after the cancelled consumer handed back 0 and 1, the next one got %v, want %v (r: redelivered)", bodies, want)
		}
	})
}

// When the active consumer's channel closes, or its connection, with
// deliveries unacked, they go to the next consumer in the order the
// consumers subscribed, first, in the order they were delivered, marked
// redelivered, before anything behind them; the third consumer still
// waits. A quorum queue counts the return (x-delivery-count 1 on every
// version; x-acquired-count 1 where the broker writes it).
func (s *suite) singleActiveConsumerEndReturnsUnackedToTheNextInOrder(t *testing.T) {
	eachSingleActiveKind(t, bothKinds, func(t *testing.T, kind string) {
		for _, end := range []string{"channel", "connection"} {
			t.Run("its "+end+" closed", func(t *testing.T) {
				c := s.dial(t)
				q := singleActiveQueue(t, c, openChannel(t, c), kind)
				ac := s.dial(t)
				a := subscribe(t, ac, q, 3)
				b := subscribe(t, c, q, 3)
				third := subscribe(t, c, q, 3)
				publishNumbered(t, c, q, 6)
				expectBodies(t, "the active consumer", a.ds, false, "0", "1", "2")
				none(t, b.ds)
				if end == "channel" {
					_ = a.ch.Close()
				} else {
					_ = ac.Close()
				}
				got := expectBodies(t, "the next consumer", b.ds, true, "0", "1", "2")
				for _, d := range got {
					delivery, acquired := counts(d)
					if kind == "quorum" && (delivery != 1 || (s.h.AcquiredCount && acquired != 1)) {
						t.Fatalf("%q returned by a lost %s: x-delivery-count %d, x-acquired-count %d; want 1 and 1 (x-acquired-count written: %v)", d.Body, end, delivery, acquired, s.h.AcquiredCount)
					}
					if err := b.ch.Ack(d.DeliveryTag); err != nil {
						t.Fatalf("ack: %v", err)
					}
				}
				for _, d := range expectBodies(t, "the next consumer", b.ds, false, "3", "4", "5") {
					if err := b.ch.Ack(d.DeliveryTag); err != nil {
						t.Fatalf("ack: %v", err)
					}
				}
				none(t, third.ds)
				// Cancelled with nothing unacked (RabbitMQ 3.10 stalls a
				// classic queue otherwise: Harness.ClassicSingleActiveCancelStalls),
				// the second hands over to the third.
				if err := b.ch.Cancel(ctx(t), b.tag); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				publishAcked(t, openPublisher(t, c), toQueue(q, "6"))
				expectBodies(t, "the third consumer, once the second was cancelled", third.ds, false, "6")
			})
		}
	})
}

// A single-active-consumer queue re-declared without the argument, or a
// queue declared without it re-declared with it, is refused as RabbitMQ
// refuses an inequivalent argument: 406, the channel closed.
func (s *suite) singleActiveConsumerIsCheckedOnRedeclare(t *testing.T) {
	eachSingleActiveKind(t, bothKinds, func(t *testing.T, kind string) {
		c := s.dial(t)
		q := singleActiveQueue(t, c, openChannel(t, c), kind)
		ch := openChannel(t, c)
		_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Durable: true, Args: transport.Table{"x-queue-type": kind}})
		e := brokerError(t, err, transport.CodePreconditionFailed)
		if want := "inequivalent arg 'x-single-active-consumer' for queue '" + q + "' in vhost '/': received none but current is the value 'true' of type 'bool'"; !strings.Contains(e.Reason, want) {
			t.Fatalf("re-declared without x-single-active-consumer: refused with %q, want it to say %q", e.Reason, want)
		}
		closedWith(t, ch, transport.CodePreconditionFailed)

		plain := quorumOrClassic(t, c, kind)
		ch = openChannel(t, c)
		_, err = ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: plain, Durable: true, Args: transport.Table{"x-queue-type": kind, "x-single-active-consumer": true}})
		e = brokerError(t, err, transport.CodePreconditionFailed)
		if want := "inequivalent arg 'x-single-active-consumer' for queue '" + plain + "' in vhost '/': received the value 'true' of type 'bool' but current is none"; !strings.Contains(e.Reason, want) {
			t.Fatalf("re-declared with x-single-active-consumer: refused with %q, want it to say %q", e.Reason, want)
		}
		closedWith(t, ch, transport.CodePreconditionFailed)
	})
}

// quorumOrClassic declares a durable queue of type kind with no other
// argument, deleted at cleanup.
func quorumOrClassic(t *testing.T, c transport.Connection, kind string) string {
	t.Helper()
	name := unique("plain-" + kind)
	ch := openChannel(t, c)
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Durable: true, Args: transport.Table{"x-queue-type": kind}}); err != nil {
		t.Fatalf("declare %s queue %s: %v", kind, name, err)
	}
	t.Cleanup(func() {
		if cc, err := c.Channel(context.Background()); err == nil {
			_, _ = cc.DeleteQueue(context.Background(), name)
			_ = cc.Close()
		}
	})
	return name
}

// x-single-active-consumer must be a boolean, and a stream refuses it:
// 406 PRECONDITION_FAILED, naming the argument.
func (s *suite) singleActiveConsumerArgumentIsChecked(t *testing.T) {
	c := s.dial(t)
	for _, tc := range []struct {
		what string
		args transport.Table
		says string
	}{
		{"a string", transport.Table{"x-single-active-consumer": "true"}, "{unacceptable_type,longstr}"},
		{"a stream", transport.Table{"x-queue-type": "stream", "x-single-active-consumer": true}, "of queue type rabbit_stream_queue"},
	} {
		ch := openChannel(t, c)
		name := unique("sac-arg")
		_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Durable: true, Args: tc.args})
		if err == nil {
			_, _ = openChannel(t, c).DeleteQueue(ctx(t), name)
			t.Fatalf("x-single-active-consumer on %s was accepted, want 406", tc.what)
		}
		if e := brokerError(t, err, transport.CodePreconditionFailed); !strings.Contains(e.Reason, "invalid arg 'x-single-active-consumer'") || !strings.Contains(e.Reason, tc.says) {
			t.Fatalf("x-single-active-consumer on %s refused with %q, want it to name the argument and %q", tc.what, e.Reason, tc.says)
		}
	}
}

// Two handovers in a row by lost channels, each active consumer having
// read only part of what its prefetch allowed: the third consumer still
// receives every message in publish order, each redelivered.
func (s *suite) singleActiveConsumerHandsOverTwiceInOrder(t *testing.T) {
	eachSingleActiveKind(t, bothKinds, func(t *testing.T, kind string) {
		c := s.dial(t)
		q := singleActiveQueue(t, c, openChannel(t, c), kind)
		a := subscribe(t, c, q, 10)
		b := subscribe(t, c, q, 10)
		third := subscribe(t, c, q, 10)
		publishNumbered(t, c, q, 10)
		expectBodies(t, "the active consumer", a.ds, false, "0", "1", "2")
		_ = a.ch.Close()
		expectBodies(t, "the second consumer", b.ds, true, "0", "1", "2")
		_ = b.ch.Close()
		expectBodies(t, "the third consumer", third.ds, true, "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	})
}
