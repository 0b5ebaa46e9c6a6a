package transporttest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

func (s *suite) nackRequeueRedelivers(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "requeue", nil)
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "one"))
	publishAcked(t, p, toQueue(q, "two"))
	d := getOne(t, ch, q)
	if string(d.Body) != "one" || d.Redelivered {
		t.Fatalf("first get %q redelivered=%v", d.Body, d.Redelivered)
	}
	if err := ch.Nack(d.DeliveryTag, true); err != nil {
		t.Fatalf("nack: %v", err)
	}
	again := getOne(t, ch, q)
	if string(again.Body) != "one" || !again.Redelivered {
		t.Fatalf("after nack-requeue got %q redelivered=%v, want \"one\" redelivered at the head", again.Body, again.Redelivered)
	}
	if again.DeliveryTag == d.DeliveryTag {
		t.Fatalf("redelivery reused delivery tag %d", d.DeliveryTag)
	}
}

// Messages handed back one by one, in another order than they came, are
// delivered again where the queue type puts them: a classic queue at
// their original positions (in publish order), a quorum queue first and
// in the order they came back (RabbitMQ 3.10's quorum queues: behind the
// ready ones, Harness.QuorumReturnsBehind).
func (s *suite) returnedMessagesGoWhereTheQueueTypePutsThem(t *testing.T) {
	for _, kind := range []string{"classic", "quorum"} {
		t.Run(kind, func(t *testing.T) {
			c := s.dial(t)
			ch := openChannel(t, c)
			var q string
			if kind == "classic" {
				q = exclusiveQueue(t, ch, "returns", nil)
			} else {
				q = quorumQueue(t, c, ch, "returns", nil)
			}
			p := openPublisher(t, c)
			for _, b := range []string{"0", "1", "2", "3", "4"} {
				publishAcked(t, p, toQueue(q, b))
			}
			var got []transport.Delivery
			for range 3 {
				got = append(got, getOne(t, ch, q))
			}
			for _, i := range []int{1, 2, 0} {
				if err := ch.Reject(got[i].DeliveryTag, true); err != nil {
					t.Fatalf("reject: %v", err)
				}
			}
			readyEventually(t, c, q, 5)
			want := "0r 1r 2r 3 4"
			switch {
			case kind == "quorum" && s.h.QuorumReturnsBehind:
				want = "3 4 1r 2r 0r"
			case kind == "quorum":
				want = "1r 2r 0r 3 4"
			}
			var bodies []string
			for range 5 {
				d := getOne(t, ch, q)
				body := string(d.Body)
				if d.Redelivered {
					body += "r"
				}
				bodies = append(bodies, body)
				if err := ch.Ack(d.DeliveryTag); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			if got := strings.Join(bodies, " "); got != want {
				t.Fatalf("a %s queue, after 1, 2 and 0 of 0..4 were rejected with requeue in that order, delivers %s, want %s (r: redelivered)", kind, got, want)
			}
		})
	}
}

func (s *suite) prefetchEnforced(t *testing.T) {
	c := s.dial(t)
	setup := openChannel(t, c)
	q := exclusiveQueue(t, setup, "prefetch", nil)
	p := openPublisher(t, c)
	for i := range 10 {
		publishAcked(t, p, toQueue(q, fmt.Sprint(i)))
	}
	ch := openChannel(t, c)
	if err := ch.Qos(3); err != nil {
		t.Fatalf("qos: %v", err)
	}
	ds := consume(t, ch, q)
	for i := range 3 {
		if d := next(t, ds); string(d.Body) != fmt.Sprint(i) || d.DeliveryTag != uint64(i+1) {
			t.Fatalf("delivery %d: body %q tag %d", i, d.Body, d.DeliveryTag)
		}
	}
	none(t, ds)
	readyEventually(t, c, q, 7)
	if err := ch.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	readyEventually(t, c, q, 10)
	d := getOne(t, setup, q)
	if string(d.Body) != "0" || !d.Redelivered {
		t.Fatalf("after close got %q redelivered=%v, want \"0\" redelivered", d.Body, d.Redelivered)
	}
}

func (s *suite) getReportsMessageCount(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "get", nil)
	if _, ok, err := ch.Get(ctx(t), q); err != nil || ok {
		t.Fatalf("get on an empty queue: ok=%v err=%v, want ok=false", ok, err)
	}
	p := openPublisher(t, c)
	for _, b := range []string{"a", "b", "c"} {
		publishAcked(t, p, toQueue(q, b))
	}
	d := getOne(t, ch, q)
	if string(d.Body) != "a" || d.MessageCount != 2 {
		t.Fatalf("get: %q with MessageCount %d, want \"a\" with 2", d.Body, d.MessageCount)
	}
	if err := ch.Ack(d.DeliveryTag); err != nil {
		t.Fatalf("ack: %v", err)
	}
	readyEventually(t, c, q, 2)
}

func (s *suite) unknownDeliveryTag(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	_ = ch.Ack(99) // the error may come back now or only on the channel
	if e := closedWith(t, ch, transport.CodePreconditionFailed); !strings.Contains(e.Reason, "unknown delivery tag 99") {
		t.Fatalf("reason %q, want it to name the unknown delivery tag", e.Reason)
	}
}

func (s *suite) cancelKeepsUnacked(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "cancel", nil)
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "kept"))
	if err := ch.Qos(1); err != nil {
		t.Fatalf("qos: %v", err)
	}
	tag := unique("ctag")
	ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Tag: tag})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	d := next(t, ds)
	if d.ConsumerTag != tag {
		t.Fatalf("consumer tag %q, want %q", d.ConsumerTag, tag)
	}
	if err := ch.Cancel(ctx(t), tag); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	select {
	case _, ok := <-ds:
		if ok {
			t.Fatal("delivery after cancel")
		}
	case <-time.After(wait):
		t.Fatal("delivery channel still open after cancel")
	}
	readyEventually(t, c, q, 0)
	if err := ch.Ack(d.DeliveryTag); err != nil {
		t.Fatalf("ack after cancel: %v", err)
	}
	publishAcked(t, p, toQueue(q, "after"))
	readyEventually(t, c, q, 1)
}

// A subscription cancelled after the application read some of what its
// prefetch let the broker send keeps the queue's order: the messages
// read and handed back one by one, then the rest (sent and never read,
// or never sent), come again in publish order once the channel closes,
// on classic and quorum queues.
func (s *suite) cancelledSubscriptionKeepsTheQueueOrder(t *testing.T) {
	for _, kind := range []string{"classic", "quorum"} {
		t.Run(kind, func(t *testing.T) {
			c := s.dial(t)
			setup := openChannel(t, c)
			var q string
			if kind == "classic" {
				q = exclusiveQueue(t, setup, "cancel-order", nil)
			} else {
				q = quorumQueue(t, c, setup, "cancel-order", nil)
			}
			publishNumbered(t, c, q, 10)
			ch := openChannel(t, c)
			if err := ch.Qos(10); err != nil {
				t.Fatalf("qos: %v", err)
			}
			tag := unique("ctag")
			ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Tag: tag})
			if err != nil {
				t.Fatalf("consume: %v", err)
			}
			seen := expectBodies(t, "the consumer", ds, false, "0", "1", "2")
			if err := ch.Cancel(ctx(t), tag); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			for d := range ds { // what was sent before the cancel took effect
				seen = append(seen, d)
			}
			for _, d := range seen {
				if err := ch.Nack(d.DeliveryTag, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
			}
			_ = ch.Close()
			readyEventually(t, c, q, 10)
			var bodies []string
			for range 10 {
				d := getOne(t, setup, q)
				bodies = append(bodies, string(d.Body))
				if err := setup.Ack(d.DeliveryTag); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			if got := strings.Join(bodies, " "); got != "0 1 2 3 4 5 6 7 8 9" {
				t.Fatalf("a %s queue, after a subscription read %d of 0..9, was cancelled, handed them back and closed, delivers %s, want 0..9 in order", kind, len(seen), got)
			}
		})
	}
}
