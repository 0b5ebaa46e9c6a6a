package transporttest

import (
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

func (s *suite) blockHoldsConfirms(t *testing.T) {
	if s.h.Block == nil || s.h.Unblock == nil {
		t.Skip("the harness cannot raise a resource alarm on this broker")
	}
	events := make(chan bool, 4)
	var c transport.Connection
	if s.h.DialWithOnBlocked != nil {
		c = s.h.DialWithOnBlocked(t, func(active bool, _ string) { events <- active })
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
	if s.h.DialWithOnBlocked != nil {
		select {
		case active := <-events:
			if !active {
				t.Fatal("OnBlocked(false) while blocking")
			}
		case <-time.After(wait):
			t.Fatal("OnBlocked(true, reason) not called after Block")
		}
	}
	got := make(chan transport.Confirmation, 1)
	if err := p.Publish(ctx(t), toQueue(q, "held"), func(c transport.Confirmation) { got <- c }); err != nil {
		t.Fatalf("publish while blocked: %v", err)
	}
	select {
	case c := <-got:
		t.Fatalf("confirm %v while the broker is blocked", c.Outcome)
	case <-time.After(quiet):
	}
	s.h.Unblock(t)
	unblocked = true
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
