package transporttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// wait bounds every wait in the suite; a real broker answers in far less.
const wait = 5 * time.Second

// quiet is how long the suite watches for something that must NOT happen.
const quiet = 200 * time.Millisecond

type suite struct{ h Harness }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// unique returns prefix plus a random suffix, so runs never collide on a
// shared broker.
func unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "acemq-tt-" + prefix + "-" + hex.EncodeToString(b[:])
}

func (s *suite) dial(t *testing.T) transport.Connection {
	t.Helper()
	c := s.h.Dial(t)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openChannel(t *testing.T, c transport.Connection) transport.Channel {
	t.Helper()
	ch, err := c.Channel(ctx(t))
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func openPublisher(t *testing.T, c transport.Connection) transport.Publisher {
	t.Helper()
	p, err := c.Publisher(ctx(t), true)
	if err != nil {
		t.Fatalf("open publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// exclusiveQueue declares a server-side exclusive queue (gone with its
// connection) with args and returns its name.
func exclusiveQueue(t *testing.T, ch transport.Channel, prefix string, args transport.Table) string {
	t.Helper()
	name := unique(prefix)
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: name, Exclusive: true, Args: args}); err != nil {
		t.Fatalf("declare queue %s: %v", name, err)
	}
	return name
}

// tempExchange declares an auto-cleaned exchange of kind.
func tempExchange(t *testing.T, c transport.Connection, ch transport.Channel, kind transport.ExchangeKind) string {
	t.Helper()
	name := unique("x-" + string(kind))
	if err := ch.DeclareExchange(ctx(t), transport.ExchangeSpec{Name: name, Kind: kind}); err != nil {
		t.Fatalf("declare exchange %s: %v", name, err)
	}
	t.Cleanup(func() {
		if cc, err := c.Channel(context.Background()); err == nil {
			_ = cc.DeleteExchange(context.Background(), name)
			_ = cc.Close()
		}
	})
	return name
}

func bind(t *testing.T, ch transport.Channel, q, x, key string, args transport.Table) {
	t.Helper()
	if err := ch.BindQueue(ctx(t), transport.BindingSpec{Queue: q, Exchange: x, RoutingKey: key, Args: args}); err != nil {
		t.Fatalf("bind %s to %s with %q: %v", q, x, key, err)
	}
}

// publish publishes msg and waits for its confirmation.
func publish(t *testing.T, p transport.Publisher, msg *transport.Message) transport.Confirmation {
	t.Helper()
	got := make(chan transport.Confirmation, 1)
	if err := p.Publish(ctx(t), msg, func(c transport.Confirmation) { got <- c }); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case c := <-got:
		return c
	case <-time.After(wait):
		t.Fatalf("no confirmation within %v", wait)
	}
	return transport.Confirmation{}
}

func publishAcked(t *testing.T, p transport.Publisher, msg *transport.Message) {
	t.Helper()
	if c := publish(t, p, msg); c.Outcome != transport.Acked {
		t.Fatalf("publish to %q/%q: outcome %v, want acked", msg.Exchange, msg.RoutingKey, c.Outcome)
	}
}

func toQueue(q, body string) *transport.Message {
	return &transport.Message{RoutingKey: q, Body: []byte(body)}
}

// next waits for one delivery.
func next(t *testing.T, ds <-chan transport.Delivery) transport.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatal("delivery channel closed while waiting for a delivery")
		}
		return d
	case <-time.After(wait):
		t.Fatalf("no delivery within %v", wait)
	}
	return transport.Delivery{}
}

// none asserts no delivery arrives for a short while.
func none(t *testing.T, ds <-chan transport.Delivery) {
	t.Helper()
	select {
	case d, ok := <-ds:
		if ok {
			t.Fatalf("unexpected delivery %q", d.Body)
		}
	case <-time.After(quiet):
	}
}

func consume(t *testing.T, ch transport.Channel, q string) <-chan transport.Delivery {
	t.Helper()
	ds, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q})
	if err != nil {
		t.Fatalf("consume %s: %v", q, err)
	}
	return ds
}

// getOne pulls one message, failing if none arrives before the deadline
// (a dead-lettered message may take a moment to land on a real broker).
func getOne(t *testing.T, ch transport.Channel, q string) transport.Delivery {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		d, ok, err := ch.Get(ctx(t), q)
		if err != nil {
			t.Fatalf("get %s: %v", q, err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s stayed empty for %v", q, wait)
		}
		time.Sleep(10 * time.Millisecond) // basic.get offers no event to wait on
	}
}

// readyEventually polls the queue's ready count until it equals want.
func readyEventually(t *testing.T, c transport.Connection, q string, want int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ch, err := c.Channel(ctx(t))
		if err != nil {
			t.Fatalf("open channel: %v", err)
		}
		info, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true})
		_ = ch.Close()
		if err != nil {
			t.Fatalf("passive declare %s: %v", q, err)
		}
		if info.Messages == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s has %d ready messages, want %d", q, info.Messages, want)
		}
		time.Sleep(10 * time.Millisecond) // message counts offer no event to wait on
	}
}

// brokerError asserts err carries a broker reply with code.
func brokerError(t *testing.T, err error, code int) *transport.Error {
	t.Helper()
	var e *transport.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v carries no *transport.Error; want code %d", err, code)
	}
	if e.Code != code {
		t.Fatalf("broker said %d %q, want code %d", e.Code, e.Reason, code)
	}
	return e
}

// closedWith waits for ch to end and asserts it ended with code.
func closedWith(t *testing.T, ch transport.Channel, code int) *transport.Error {
	t.Helper()
	select {
	case <-ch.Done():
	case <-time.After(wait):
		t.Fatalf("channel still open %v after a %d", wait, code)
	}
	return brokerError(t, ch.Err(), code)
}
