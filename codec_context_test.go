package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// hangingCodec is JSON whose DecodeContext waits for its context to end on
// the first `hangs` calls, as a claim-check store that does not answer
// would, and then reads normally.
type hangingCodec struct {
	acemq.Codec
	hangs int64
	calls *atomic.Int64
}

func (h hangingCodec) DecodeContext(ctx context.Context, contentType string, data []byte, v any) error {
	if h.calls.Add(1) <= h.hangs {
		<-ctx.Done()
		return ctx.Err()
	}
	return h.Decode(contentType, data, v)
}

func TestDecodeThatOutlivesTheDecodeTimeoutIsRetriedNotParked(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	calls := &atomic.Int64{}
	seen := decide(r, "q", func(*acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Codec: hangingCodec{Codec: acemq.JSON(), hangs: 1, calls: calls}, DecodeTimeout: 20 * time.Millisecond, Retry: acemq.Fixed(2, time.Millisecond)})
	sent := r.send("q", order{ID: "slow"})

	first := r.nextSettlement()
	if first.Outcome != acemq.ConsumeRetried || first.Handled {
		t.Fatalf("first settlement %+v, want retried without running the handler", first)
	}
	second := r.nextSettlement()
	if second.Outcome != acemq.ConsumeAcked || second.Envelope.ID != sent.Envelope.ID {
		t.Fatalf("second settlement %+v, want the same message acked", second)
	}
	if m := <-seen; m.Payload.ID != "slow" {
		t.Fatalf("payload %+v", m.Payload)
	}
	if r.ready("q.parked") != 0 {
		t.Fatal("a decode timeout parked the message")
	}
}

func TestDecodeTimeoutOnTheLastAttemptDeadLettersWithTheTimeoutReason(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	calls := &atomic.Int64{}
	decide(r, "q", func(*acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Codec: hangingCodec{Codec: acemq.JSON(), hangs: 1, calls: calls}, DecodeTimeout: 20 * time.Millisecond})
	r.send("q", order{ID: "slow"})
	s := r.nextSettlement()
	const want = "exhausted 1 attempt: acemq: decoding the body took longer than the decode timeout (20ms)"
	if s.Outcome != acemq.ConsumeDeadLettered || s.Target != "q.dlq" || !strings.HasPrefix(s.Reason, want) {
		t.Fatalf("settlement %+v, want dead-lettered to q.dlq with a reason starting %q", s, want)
	}
	if m := r.pull("q.dlq"); m.Envelope.Error != s.Reason {
		t.Fatalf("x-acemq-error = %q", m.Envelope.Error)
	}
}

func TestCompositeHandsTheDecodeDeadlineToItsMember(t *testing.T) {
	calls := &atomic.Int64{}
	c := acemq.Composite(hangingCodec{Codec: acemq.JSON(), hangs: 1, calls: calls}, acemq.Text())
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	var v map[string]any
	err := acemq.DecodeContext(ctx, c, "application/json", []byte(`{}`), &v)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the member's deadline error", err)
	}
	if err := acemq.DecodeContext(context.Background(), c, "application/json", []byte(`{"a":1}`), &v); err != nil || v["a"] != 1.0 {
		t.Fatalf("second decode: %v, %v", v, err)
	}
	// A codec without DecodeContext is read through Decode.
	var s string
	if err := acemq.DecodeContext(context.Background(), c, "text/plain", []byte("hi"), &s); err != nil || s != "hi" {
		t.Fatalf("text member: %q, %v", s, err)
	}
}

// A negative DecodeTimeout is the documented "no deadline of its own"
// (the zero value means the 30s default), so Consume accepts it.
func TestNegativeDecodeTimeoutMeansNoDeadlineOfItsOwn(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	if _, err := acemq.Consume(context.Background(), r.c, "q", func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{DecodeTimeout: -time.Second}); err != nil {
		t.Fatalf("Consume with a negative DecodeTimeout: %v", err)
	}
}
