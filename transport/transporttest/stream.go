package transporttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// stream declares a durable stream queue with args (x-queue-type added),
// deleted when the test ends, and returns its name.
func stream(t *testing.T, c transport.Connection, ch transport.Channel, args transport.Table) string {
	t.Helper()
	name := unique("stream")
	a := transport.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Durable: true, Args: a}); err != nil {
		t.Fatalf("declare stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cc, err := c.Channel(context.Background()); err == nil {
			_, _ = cc.DeleteQueue(context.Background(), name)
			_ = cc.Close()
		}
	})
	return name
}

// readStream subscribes to stream q from offset on a fresh channel with
// prefetch 10.
func readStream(t *testing.T, c transport.Connection, q string, offset any) (transport.Channel, <-chan transport.Delivery) {
	t.Helper()
	ch := openChannel(t, c)
	if err := ch.Qos(10); err != nil {
		t.Fatalf("qos: %v", err)
	}
	ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Args: transport.Table{"x-stream-offset": offset}})
	if err != nil {
		t.Fatalf("consume %s from %v: %v", q, offset, err)
	}
	return ch, ds
}

// streamOffset returns a delivery's x-stream-offset header, failing when
// it is missing or not an int64.
func streamOffset(t *testing.T, d transport.Delivery) int64 {
	t.Helper()
	v, ok := d.Headers["x-stream-offset"].(int64)
	if !ok {
		t.Fatalf("delivery %q has x-stream-offset %#v, want an int64", d.Body, d.Headers["x-stream-offset"])
	}
	return v
}

// expectOffsets reads len(bodies) deliveries, asserting each body and that
// offsets run from first in steps of one; each is acked.
func expectOffsets(t *testing.T, ch transport.Channel, ds <-chan transport.Delivery, first int64, bodies ...string) {
	t.Helper()
	for i, b := range bodies {
		d := next(t, ds)
		if string(d.Body) != b || streamOffset(t, d) != first+int64(i) {
			t.Fatalf("delivery %d: %q at offset %d, want %q at %d", i, d.Body, streamOffset(t, d), b, first+int64(i))
		}
		if err := ch.Ack(d.DeliveryTag); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}

func (s *suite) streamReadersAreIndependent(t *testing.T) {
	c := s.dial(t)
	setup := openChannel(t, c)
	q := stream(t, c, setup, nil)
	p := openPublisher(t, c)
	for i := range 5 {
		publishAcked(t, p, toQueue(q, fmt.Sprint(i)))
	}
	chA, a := readStream(t, c, q, "first")
	expectOffsets(t, chA, a, 0, "0", "1", "2", "3", "4")
	// Acks advance nothing: a second reader still finds every message.
	chB, b := readStream(t, c, q, int64(2))
	expectOffsets(t, chB, b, 2, "2", "3", "4")
	chL, l := readStream(t, c, q, "last")
	expectOffsets(t, chL, l, 4, "4")
	chN, n := readStream(t, c, q, "next")
	none(t, n)
	publishAcked(t, p, toQueue(q, "5"))
	expectOffsets(t, chN, n, 5, "5")
	for name, r := range map[string]struct {
		ch transport.Channel
		ds <-chan transport.Delivery
	}{"first": {chA, a}, "offset 2": {chB, b}, "last": {chL, l}} {
		d := next(t, r.ds)
		if string(d.Body) != "5" || streamOffset(t, d) != 5 || d.Redelivered {
			t.Fatalf("reader from %s: %q at %d redelivered=%v, want \"5\" at 5", name, d.Body, streamOffset(t, d), d.Redelivered)
		}
	}
	// RabbitMQ answers a stream's passive declare with the message count of
	// its statistics (rabbit_stream_queue:stat reads the "messages" info
	// item), which trail the log: 0 until a statistics tick has seen the
	// messages, then what it saw. Neither is a count of what is left to
	// read (a stream keeps everything), so only the bounds are promised.
	if info, err := setup.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true}); err != nil || info.Messages < 0 || info.Messages > 6 {
		t.Fatalf("passive declare of a stream: %+v, %v; want it answered with a count between 0 and the 6 messages in it", info, err)
	}
}

func (s *suite) streamPrefetchIsEnforced(t *testing.T) {
	c := s.dial(t)
	q := stream(t, c, openChannel(t, c), nil)
	p := openPublisher(t, c)
	for i := range 15 {
		publishAcked(t, p, toQueue(q, fmt.Sprint(i)))
	}
	ch, ds := readStream(t, c, q, "first")
	var tags []uint64
	for i := range 10 {
		d := next(t, ds)
		if streamOffset(t, d) != int64(i) {
			t.Fatalf("delivery %d at offset %d", i, streamOffset(t, d))
		}
		tags = append(tags, d.DeliveryTag)
	}
	none(t, ds)
	// An ack returns credit; nothing is removed or redelivered.
	if err := ch.Ack(tags[0]); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if d := next(t, ds); streamOffset(t, d) != 10 || d.Redelivered {
		t.Fatalf("after an ack got offset %d redelivered=%v, want offset 10, not redelivered", streamOffset(t, d), d.Redelivered)
	}
}

// streamRejectIsRefused: RabbitMQ has no reject or nack on a stream; it
// closes the connection with 540, so a reader may only ever ack.
// streamNack: a nack on a stream ends the connection with 540 on RabbitMQ 3
// and memory://; RabbitMQ 4 settles it as an ack (the next message follows,
// not a redelivery). The engine never relies on either: on a stream it acks
// wherever it would hand a delivery back (ConsumerConfig.OnStream).
func (s *suite) streamNack(t *testing.T) {
	setup := s.dial(t)
	q := stream(t, setup, openChannel(t, setup), nil)
	p := openPublisher(t, setup)
	publishAcked(t, p, toQueue(q, "x"))
	publishAcked(t, p, toQueue(q, "y"))
	c := s.dial(t)
	ch, ds := readStream(t, c, q, "first")
	d := next(t, ds)
	_ = ch.Nack(d.DeliveryTag, false) // the refusal arrives asynchronously
	if s.h.RabbitMQ4 {
		// "x" is not offered again: the next delivery is "y".
		if d2 := next(t, ds); string(d2.Body) != "y" || d2.Redelivered {
			t.Fatalf("after a nack on a stream got %q (redelivered %v), want the next message \"y\"", d2.Body, d2.Redelivered)
		}
		// A round trip on a fresh channel after the nack: the connection is
		// still up (the broker handled the nack before this declare).
		if _, err := openChannel(t, c).DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true}); err != nil {
			t.Fatalf("the connection is unusable after a nack on a stream: %v", err)
		}
		return
	}
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatalf("connection still open %v after a nack on a stream", wait)
	}
	brokerError(t, c.Err(), 540)
}

func (s *suite) streamConsumeWithoutPrefetchIs406(t *testing.T) {
	c := s.dial(t)
	q := stream(t, c, openChannel(t, c), nil)
	ch := openChannel(t, c)
	_, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Args: transport.Table{"x-stream-offset": "first"}})
	if err == nil {
		// amqp091 reports a channel close asynchronously at times.
		closedWith(t, ch, transport.CodePreconditionFailed)
		return
	}
	brokerError(t, err, transport.CodePreconditionFailed)
}

func (s *suite) streamNonDurableIsRefused(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	name := unique("stream-transient")
	_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Exclusive: true, Args: transport.Table{"x-queue-type": "stream"}})
	if err == nil {
		t.Fatal("an exclusive stream was declared; RabbitMQ refuses it")
	}
	brokerError(t, err, transport.CodePreconditionFailed)
}

func (s *suite) streamAttachByTimestamp(t *testing.T) {
	c := s.dial(t)
	q := stream(t, c, openChannel(t, c), nil)
	p := openPublisher(t, c)
	for _, b := range []string{"old-0", "old-1", "old-2"} {
		publishAcked(t, p, toQueue(q, b))
	}
	// AMQP timestamps are whole seconds: wait for the next second to start.
	at := time.Now().Truncate(time.Second).Add(time.Second)
	deadline := time.Now().Add(wait)
	for time.Now().Before(at) {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not reach the next second")
		}
		time.Sleep(time.Until(at) + time.Millisecond) // waiting for the wall clock itself
	}
	for _, b := range []string{"new-3", "new-4"} {
		publishAcked(t, p, toQueue(q, b))
	}
	ch, ds := readStream(t, c, q, at)
	// At most the rest of the chunk holding that time may come first.
	var got []string
	for len(got) == 0 || got[len(got)-1] != "new-4" {
		d := next(t, ds)
		got = append(got, string(d.Body))
		if err := ch.Ack(d.DeliveryTag); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if len(got) < 2 || got[len(got)-2] != "new-3" || len(got) > 3 {
		t.Fatalf("from %v read %q, want [new-3 new-4] with at most one earlier message", at, got)
	}
}

func (s *suite) streamGetIsRefused(t *testing.T) {
	c := s.h.Dial(t)
	t.Cleanup(func() { _ = c.Close() })
	setup := s.dial(t)
	q := stream(t, setup, openChannel(t, setup), nil)
	ch := openChannel(t, c)
	_, _, err := ch.Get(ctx(t), q)
	if err == nil {
		t.Fatal("basic.get on a stream succeeded; RabbitMQ refuses it")
	}
	brokerError(t, err, 540)
}

// streamRetention publishes into small segments, lets them age past
// x-max-age and rolls a new segment: the aged segments go, whole, and the
// segment being written stays.
func (s *suite) streamRetention(t *testing.T) {
	c := s.dial(t)
	q := stream(t, c, openChannel(t, c), transport.Table{
		"x-max-age":                       "1s",
		"x-stream-max-segment-size-bytes": int64(1000),
	})
	p := openPublisher(t, c)
	body := string(make([]byte, 300))
	for range 12 {
		publishAcked(t, p, toQueue(q, body))
	}
	aged := time.Now().Add(1100 * time.Millisecond)
	for time.Now().Before(aged) {
		time.Sleep(time.Until(aged)) // waiting for the messages to age
	}
	deadline := time.Now().Add(wait)
	for i := 0; ; i++ {
		// Each publish may fill a segment and start the next, which is
		// when RabbitMQ evaluates retention.
		publishAcked(t, p, toQueue(q, fmt.Sprint("fresh-", i)))
		first, ok := s.firstOffset(t, q)
		if ok && first > 0 {
			t.Logf("first offset %d after %d fresh publishes", first, i+1)
			// The newest message is still there.
			r := s.dial(t)
			chL, l := readStream(t, r, q, "last")
			if d := next(t, l); string(d.Body) != fmt.Sprint("fresh-", i) {
				t.Fatalf("last message is %q, want fresh-%d", d.Body, i)
			}
			_ = chL.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d fresh publishes the stream still starts at offset 0", i+1)
		}
	}
}

// firstOffset attaches to q at "first" on a connection of its own and
// returns the offset of the first delivery. ok is false when the broker
// refused the attach: RabbitMQ 3.10 may answer 541 (ending the connection)
// while retention is deleting the segment an attach is opening.
func (s *suite) firstOffset(t *testing.T, q string) (int64, bool) {
	t.Helper()
	c := s.h.Dial(t)
	defer func() { _ = c.Close() }()
	ch, err := c.Channel(ctx(t))
	if err != nil {
		return 0, false
	}
	if err := ch.Qos(1); err != nil {
		return 0, false
	}
	ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q, Args: transport.Table{"x-stream-offset": "first"}})
	if err != nil {
		var e *transport.Error
		if errors.As(err, &e) && e.Code == transport.CodeInternalError {
			return 0, false
		}
		t.Fatalf("consume %s from first: %v", q, err)
	}
	d, open := <-ds
	if !open {
		return 0, false
	}
	return streamOffset(t, d), true
}
