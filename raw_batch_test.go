package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

func rawBatch(q string, keys ...string) []acemq.RawMessage {
	ms := make([]acemq.RawMessage, len(keys))
	for i, k := range keys {
		ms[i] = acemq.RawMessage{RoutingKey: k, MessageID: fmt.Sprintf("%s-%d", q, i), ContentType: "text/plain", Body: []byte(k)}
	}
	return ms
}

// A batch goes out on one channel, so even a Conn with several publishing
// channels delivers it in the order given, every member confirmed.
func TestPublishRawBatchKeepsOrderAcrossPublishingChannels(t *testing.T) {
	r := newRig(t, acemq.Config{PublishChannels: 4})
	r.queue("batch")
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "batch"
	}
	ms := rawBatch("batch", keys...)
	for i, err := range r.c.PublishRawBatch(context.Background(), ms) {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	for i := range ms {
		if m := r.pull("batch"); m.Envelope.ID != ms[i].MessageID {
			t.Fatalf("message %d is %s, want %s", i, m.Envelope.ID, ms[i].MessageID)
		}
	}
}

// A member that fails (unroutable) gets its own error; the members before
// it are confirmed; the members after it are either confirmed (written
// before the failure was known) or not sent at all.
func TestPublishRawBatchReportsEachMember(t *testing.T) {
	r := newRig(t)
	r.queue("batch")
	ms := rawBatch("batch", "batch", "batch", "nowhere", "batch", "batch")
	errs := r.c.PublishRawBatch(context.Background(), ms)
	if errs[0] != nil || errs[1] != nil || !acemq.IsUnroutable(errs[2]) {
		t.Fatalf("errors %v", errs)
	}
	for i, err := range errs[3:] {
		var pe *acemq.PublishError
		if err != nil && (!errors.As(err, &pe) || pe.Sent) {
			t.Fatalf("member %d after the failure: %v, want confirmed or not sent", i+3, err)
		}
	}
}

// Once the context's deadline has passed nothing is written: every member
// is reported not sent.
func TestPublishRawBatchWritesNothingPastItsDeadline(t *testing.T) {
	r := newRig(t)
	r.queue("batch")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for i, err := range r.c.PublishRawBatch(ctx, rawBatch("batch", "batch", "batch")) {
		var pe *acemq.PublishError
		if !errors.As(err, &pe) || pe.Sent {
			t.Fatalf("member %d: %v, want not sent", i, err)
		}
	}
	if n := r.ready("batch"); n != 0 {
		t.Fatalf("%d messages arrived", n)
	}
}
