package transporttest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

func (s *suite) passiveDeclareMissingQueue(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := unique("absent")
	_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true})
	e := brokerError(t, err, transport.CodeNotFound)
	if !strings.Contains(e.Reason, q) || e.Connection {
		t.Fatalf("reason %q connection=%v: want the queue named and a channel-level error", e.Reason, e.Connection)
	}
	closedWith(t, ch, transport.CodeNotFound)
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true}); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("declare on a closed channel: %v, want ErrClosed", err)
	}
	// The connection survives a channel error.
	openChannel(t, c)
}

func (s *suite) inequivalentRedeclare(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "ineq", transport.Table{"x-message-ttl": int32(60000)})
	_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Exclusive: true, Args: transport.Table{"x-message-ttl": int32(1000)}})
	e := brokerError(t, err, transport.CodePreconditionFailed)
	if !strings.Contains(e.Reason, "inequivalent arg 'x-message-ttl'") {
		t.Fatalf("reason %q does not name the inequivalent argument", e.Reason)
	}
	closedWith(t, ch, transport.CodePreconditionFailed)
}

func (s *suite) integerArgsCompareAcrossWidths(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "widths", transport.Table{"x-max-length": int32(10)})
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Exclusive: true, Args: transport.Table{"x-max-length": int64(10)}}); err != nil {
		t.Fatalf("re-declare with int64 where int32 was used: %v", err)
	}
}

func (s *suite) exclusiveQueueGone(t *testing.T) {
	owner := s.h.Dial(t)
	q := exclusiveQueue(t, openChannel(t, owner), "gone", nil)
	if err := owner.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	other := s.dial(t)
	deadline := time.Now().Add(wait)
	for {
		ch := openChannel(t, other)
		_, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Passive: true})
		if transport.Code(err) == transport.CodeNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("exclusive queue %s still there %v after its connection closed (last: %v)", q, wait, err)
		}
		time.Sleep(10 * time.Millisecond) // queue deletion offers no event to wait on
	}
}

func (s *suite) exclusiveQueueLocked(t *testing.T) {
	owner := s.dial(t)
	q := exclusiveQueue(t, openChannel(t, owner), "locked", nil)
	other := s.dial(t)
	ch := openChannel(t, other)
	_, err := ch.Consume(ctx(t), transport.ConsumeSpec{Queue: q})
	brokerError(t, err, transport.CodeResourceLocked)
	closedWith(t, ch, transport.CodeResourceLocked)
}
