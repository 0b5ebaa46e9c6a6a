package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rawpipe"
)

// The outbox relay's pinned-channel writer (Conn.RawPipe): a batch
// written behind one whose confirms are outstanding goes out at once, and
// a batch written behind one whose failure is known is not written at all.
// Memory only: the broker must withhold confirms (StopConfirming).
func TestRawPipeWritesBehindAnOutstandingBatchAndNothingBehindAFailedOne(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	ctx := context.Background()
	pipe := r.c.RawPipe()
	msg := func(id, key string) rawpipe.Message {
		return rawpipe.Message{RoutingKey: key, ContentType: "application/json", MessageID: id, Body: []byte(`{}`)}
	}
	r.broker.StopConfirming()
	b0 := pipe.Write(ctx, []rawpipe.Message{msg("a", "q"), msg("b", "q")}, nil)
	b1 := pipe.Write(ctx, []rawpipe.Message{msg("c", "q"), msg("d", "q")}, b0)
	if n := r.ready("q"); n != 4 {
		r.broker.ResumeConfirming()
		t.Fatalf("with the first batch's confirms outstanding the queue holds %d messages; want both batches' 4", n)
	}
	r.broker.ResumeConfirming()
	for i, b := range []rawpipe.Batch{b0, b1} {
		for j, err := range b.Wait(ctx) {
			if err != nil {
				t.Fatalf("batch %d message %d: %v", i, j, err)
			}
		}
	}

	b2 := pipe.Write(ctx, []rawpipe.Message{msg("e", "nowhere")}, nil)
	deadline := time.Now().Add(waitLimit)
	for !b2.Failed() {
		if time.Now().After(deadline) {
			t.Fatal("the unroutable message's return never made its batch failed")
		}
		time.Sleep(time.Millisecond) // polling for the broker's answer
	}
	errs := pipe.Write(ctx, []rawpipe.Message{msg("f", "q")}, b2).Wait(ctx)
	var pe *acemq.PublishError
	if !errors.As(errs[0], &pe) || pe.Sent {
		t.Fatalf("a message behind a failed batch: %v; want a PublishError with Sent false", errs[0])
	}
	if n := r.ready("q"); n != 4 {
		t.Fatalf("the queue holds %d messages; want 4 (nothing written behind the failed batch)", n)
	}
	if err := b2.Wait(ctx)[0]; !acemq.IsUnroutable(err) {
		t.Fatalf("the unroutable message: %v", err)
	}
}
