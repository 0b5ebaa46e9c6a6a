package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// A batch in which only the first failure was a refusal is not paused:
// IsPaused and errors.Is(err, ErrPublishingPaused) are true only when every
// failure was one (errors.go, publisher.go, docs/publishing.md), as
// IsUnroutable is only when every failure was unroutable; errors.As still
// reaches the first failure's PublishError.
func TestIsPausedOnABatchOnlyWhenEveryFailureWasARefusal(t *testing.T) {
	paused := &acemq.PublishingPausedError{PublishError: acemq.PublishError{MessageID: "1", Reason: "the broker has blocked this connection", Outcome: acemq.OutcomeRefused}}
	nacked := &acemq.PublishError{MessageID: "2", Reason: "the broker refused to confirm it", Sent: true, Nacked: true, Outcome: acemq.OutcomeFailed}
	mixed := &acemq.BatchPublishError{Total: 2, Failed: 2, First: paused, AllPaused: false,
		Results: []acemq.Result{{Err: paused}, {Err: nacked}}}
	if acemq.IsPaused(mixed) || errors.Is(mixed, acemq.ErrPublishingPaused) {
		t.Fatal("a batch with a refusal first and a nack after it reads as paused")
	}
	var pe *acemq.PublishError
	if !errors.As(mixed, &pe) || pe.MessageID != "1" {
		t.Fatalf("errors.As does not reach the first failure: %+v", pe)
	}
	all := &acemq.BatchPublishError{Total: 2, Failed: 2, First: paused, AllPaused: true,
		Results: []acemq.Result{{Err: paused}, {Err: paused}}}
	if !acemq.IsPaused(all) || !errors.Is(all, acemq.ErrPublishingPaused) {
		t.Fatal("a batch of refusals only does not read as paused")
	}
	first := &acemq.BatchPublishError{Total: 1, Failed: 1, First: context.DeadlineExceeded}
	if !errors.Is(first, context.DeadlineExceeded) {
		t.Fatal("errors.Is does not match the first failure's cause")
	}
}

// One ErrClosed: a channel asked of a Conn whose consuming connection has
// ended (lost, not yet recovered) fails with the one sentinel, whichever
// layer noticed.
func TestConnChannelOnAnEndedConnectionIsErrClosed(t *testing.T) {
	r := newRig(t, acemq.Config{RecoveryInterval: time.Hour, RecoveryIntervalMax: time.Hour})
	r.broker.DropConnections()
	for deadline := time.Now().Add(10 * time.Second); r.c.State() != acemq.StateLost; {
		if time.Now().After(deadline) {
			t.Fatalf("state %s after the drop, want lost", r.c.State())
		}
		<-time.After(time.Millisecond)
	}
	_, err := r.c.Channel(context.Background())
	if !errors.Is(err, acemq.ErrClosed) {
		t.Fatalf("Channel on an ended connection = %v; want acemq.ErrClosed", err)
	}
	if !errors.Is(err, transport.ErrClosed) || acemq.ErrClosed != transport.ErrClosed {
		t.Fatal("acemq.ErrClosed and transport.ErrClosed are two sentinels")
	}
}
