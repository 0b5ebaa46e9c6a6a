package transporttest

import (
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// blockHoldsConfirms checks RabbitMQ's resource alarm as a publisher sees
// it: raising the alarm tells nobody; the first publish after it is
// accepted, held unconfirmed, and answered with connection.blocked; at
// Unblock the connection is told so and the held publish is confirmed.
func (s *suite) blockHoldsConfirms(t *testing.T) {
	if s.h.Block == nil || s.h.Unblock == nil {
		t.Skip("the harness cannot raise a resource alarm on this broker")
	}
	type notice struct {
		active bool
		reason string
	}
	events := make(chan notice, 4)
	notified := s.h.DialWithOnBlocked != nil
	var c transport.Connection
	if notified {
		c = s.h.DialWithOnBlocked(t, func(active bool, reason string) { events <- notice{active, reason} })
		t.Cleanup(func() { _ = c.Close() })
	} else {
		c = s.dial(t)
	}
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "blocked", nil)
	p := openPublisher(t, c)

	s.h.Block(t, "low on memory")
	unblocked := false
	t.Cleanup(func() {
		if !unblocked {
			s.h.Unblock(t)
		}
	})
	if notified {
		select {
		case n := <-events:
			t.Fatalf("OnBlocked(%v, %q) before the connection published: the broker tells a connection only when it publishes", n.active, n.reason)
		case <-time.After(quiet):
		}
	}
	got := make(chan transport.Confirmation, 1)
	if err := p.Publish(ctx(t), toQueue(q, "held"), func(c transport.Confirmation) { got <- c }); err != nil {
		t.Fatalf("publish while blocked: %v", err)
	}
	if notified {
		select {
		case n := <-events:
			if !n.active || n.reason != "low on memory" {
				t.Fatalf("OnBlocked(%v, %q) after publishing during the alarm, want (true, \"low on memory\")", n.active, n.reason)
			}
		case <-time.After(wait):
			t.Fatal("OnBlocked(true, reason) not called after publishing during the alarm")
		}
	}
	select {
	case c := <-got:
		t.Fatalf("confirm %v while the broker is blocked", c.Outcome)
	case <-time.After(quiet):
	}
	s.h.Unblock(t)
	unblocked = true
	if notified {
		select {
		case n := <-events:
			if n.active {
				t.Fatalf("OnBlocked(true, %q) again, want (false) after unblock", n.reason)
			}
		case <-time.After(wait):
			t.Fatal("OnBlocked(false) not called after unblock")
		}
	}
	select {
	case c := <-got:
		if c.Outcome != transport.Acked {
			t.Fatalf("after unblock: %v, want acked", c.Outcome)
		}
	case <-time.After(wait):
		t.Fatal("no confirm after unblock")
	}
	readyEventually(t, c, q, 1)
}

func (s *suite) dropConnections(t *testing.T) {
	if s.h.DropConnections == nil {
		t.Skip("the harness cannot force connections closed on this broker")
	}
	keeper := s.dial(t)
	kch := openChannel(t, keeper)
	q := unique("survivor")
	if _, err := kch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Durable: true}); err != nil {
		t.Fatalf("declare: %v", err)
	}
	t.Cleanup(func() {
		c := s.h.Dial(t)
		defer c.Close()
		if ch, err := c.Channel(ctx(t)); err == nil {
			_, _ = ch.DeleteQueue(ctx(t), q)
		}
	})
	p := openPublisher(t, keeper)
	publishAcked(t, p, toQueue(q, "unacked"))
	d := getOne(t, kch, q)
	_ = d

	s.h.DropConnections(t)
	select {
	case <-keeper.Done():
	case <-time.After(wait):
		t.Fatal("connection still open after DropConnections")
	}
	e := brokerError(t, keeper.Err(), transport.CodeConnectionForced)
	if !e.Server || !e.Connection {
		t.Fatalf("error %+v, want Server and Connection set", e)
	}
	fresh := s.dial(t)
	ch := openChannel(t, fresh)
	again := getOne(t, ch, q)
	if string(again.Body) != "unacked" || !again.Redelivered {
		t.Fatalf("after drop got %q redelivered=%v, want the unacked message redelivered", again.Body, again.Redelivered)
	}
	if err := ch.Ack(again.DeliveryTag); err != nil {
		t.Fatalf("ack: %v", err)
	}
}
