package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

const testWait = 5 * time.Second

// newTestBroker returns a fresh, uniquely named broker deleted after t.
func newTestBroker(t *testing.T) (*Broker, string) {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	Delete(name)
	t.Cleanup(func() { Delete(name) })
	return Lookup(name), name
}

func dialT(t *testing.T, name string, onBlocked func(bool, string)) transport.Connection {
	t.Helper()
	c, idx, err := Driver{}.Dial(context.Background(), transport.Config{URL: "memory://" + name, OnBlocked: onBlocked})
	if err != nil || idx != 0 {
		t.Fatalf("dial memory://%s: %v (index %d)", name, err, idx)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func chanT(t *testing.T, c transport.Connection) transport.Channel {
	t.Helper()
	ch, err := c.Channel(context.Background())
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func pubT(t *testing.T, c transport.Connection) transport.Publisher {
	t.Helper()
	p, err := c.Publisher(context.Background(), true)
	if err != nil {
		t.Fatalf("publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func declareT(t *testing.T, ch transport.Channel, spec transport.QueueSpec) {
	t.Helper()
	if _, err := ch.DeclareQueue(context.Background(), spec); err != nil {
		t.Fatalf("declare %s: %v", spec.Name, err)
	}
}

// publishAsync publishes and returns where the confirmation will arrive.
func publishAsync(t *testing.T, p transport.Publisher, m *transport.Message) <-chan transport.Confirmation {
	t.Helper()
	got := make(chan transport.Confirmation, 1)
	if err := p.Publish(context.Background(), m, func(c transport.Confirmation) { got <- c }); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return got
}

func confirmation(t *testing.T, got <-chan transport.Confirmation) transport.Confirmation {
	t.Helper()
	select {
	case c := <-got:
		return c
	case <-time.After(testWait):
		t.Fatal("no confirmation")
	}
	return transport.Confirmation{}
}

func publishOutcome(t *testing.T, p transport.Publisher, m *transport.Message) transport.Outcome {
	t.Helper()
	return confirmation(t, publishAsync(t, p, m)).Outcome
}

func noConfirmation(t *testing.T, got <-chan transport.Confirmation) {
	t.Helper()
	select {
	case c := <-got:
		t.Fatalf("unexpected confirmation %v", c.Outcome)
	case <-time.After(50 * time.Millisecond):
	}
}

func recv(t *testing.T, ds <-chan transport.Delivery) transport.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return d
	case <-time.After(testWait):
		t.Fatal("no delivery")
	}
	return transport.Delivery{}
}

func closedSoon(t *testing.T, ds <-chan transport.Delivery) {
	t.Helper()
	deadline := time.After(testWait)
	for {
		select {
		case _, ok := <-ds:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("delivery channel not closed")
		}
	}
}

func wantCode(t *testing.T, err error, code int, reason string) *transport.Error {
	t.Helper()
	var e *transport.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *transport.Error (want %d)", err, code)
	}
	if e.Code != code || !e.Server {
		t.Fatalf("got %d %q server=%v, want %d from the server", e.Code, e.Reason, e.Server, code)
	}
	if reason != "" && e.Reason != reason {
		t.Fatalf("reason\n got %q\nwant %q", e.Reason, reason)
	}
	return e
}

func waitDone(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatal("not done")
	}
}

func info(t *testing.T, b *Broker, q string) transport.QueueInfo {
	t.Helper()
	i, ok := b.QueueInfo(q)
	if !ok {
		t.Fatalf("queue %s does not exist", q)
	}
	return i
}

// eventually polls cond (for broker state that offers no event).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func msgTo(q, body string) *transport.Message {
	return &transport.Message{RoutingKey: q, Body: []byte(body)}
}

var bg = context.Background()
