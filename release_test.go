package acemq_test

import (
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
)

func TestReleaseHandsTheMessageBackToTheBrokerUnchanged(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	var calls atomic.Int32
	seen := decide(r, "q", func(*acemq.Message[order]) acemq.Decision {
		if calls.Add(1) == 1 {
			return acemq.Release()
		}
		return acemq.Accept()
	})
	sent := r.send("q", order{ID: "a"})
	s := r.nextSettlement()
	if s.Outcome != acemq.ConsumeReleased || s.Target != "q" || s.Envelope.ID != sent.Envelope.ID {
		t.Fatalf("the first settlement: %+v", s)
	}
	if s := r.nextSettlement(); s.Outcome != acemq.ConsumeAcked {
		t.Fatalf("the second settlement: %+v", s)
	}
	first, second := recv(t, seen), recv(t, seen)
	if first.Envelope.Attempt != second.Envelope.Attempt || second.Envelope.ID != sent.Envelope.ID || !second.Redelivered {
		t.Fatalf("released then redelivered: attempt %d → %d, id %s, redelivered %v", first.Envelope.Attempt, second.Envelope.Attempt, second.Envelope.ID, second.Redelivered)
	}
	if r.ready("q.dlq") != 0 || r.ready("q.parked") != 0 {
		t.Fatal("a released message was set aside")
	}
	if acemq.Release().String() != "release" {
		t.Fatalf("Release().String() = %q", acemq.Release().String())
	}
}
