package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// publishWithID sends body to q as another publisher would: the envelope's
// headers with x-acemq-id set to id, and no message_id property.
func publishWithID(r *rig, q, id, body string, extra ...map[string]any) {
	r.t.Helper()
	h := acemq.NewEnvelope().WireHeaders()
	h["x-acemq-id"] = id
	for _, x := range extra {
		for k, v := range x {
			h[k] = v
		}
	}
	if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, ContentType: "application/json", Headers: h, Body: []byte(body)}); err != nil {
		r.t.Fatal(err)
	}
}

// longID is an id of n bytes that says how long it is.
func longID(n int) string {
	head := fmt.Sprintf("id-of-%d-bytes-", n)
	return head + strings.Repeat("x", n-len(head))
}

// Another publisher sent a message whose x-acemq-id is longer than the 255
// bytes an AMQP message_id property holds, to a quorum queue declared
// without dead-letter wiring. Every copy the engine made set the property
// from the id, the transport refused it, and the delivery was held 5 s and
// requeued, for ever. The copy now keeps the whole id in its x-acemq-id
// header, writes no message_id property, and says so in its reason: the
// message ends in {q}.dlq after one handler call (Reject) or after its
// retries (the retry copy carries the id the same way).
func TestAnIDLongerThanAShortStringIsSetAsideWholeInsteadOfLooping(t *testing.T) {
	for _, n := range []int{256, 60000} {
		for _, tc := range []struct {
			name   string
			decide acemq.Decision
			policy acemq.RetryPolicy
			calls  int32
			reason string
		}{
			{"reject", acemq.Reject(errors.New("no")), acemq.NoRetry(), 1, "the handler rejected it: no"},
			{"retried-then-exhausted", acemq.Retry(errors.New("again")), acemq.Fixed(2, time.Millisecond), 2, "exhausted 2 attempts: again"},
		} {
			t.Run(fmt.Sprintf("%s-%d", tc.name, n), func(t *testing.T) {
				onEveryFrameWriter(t, func(t *testing.T, r *rig) {
					q := r.named("longid")
					if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
						t.Fatal(err)
					}
					id := longID(n)
					var calls atomic.Int32
					attempts := make(chan int, 10)
					consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
						calls.Add(1)
						if m.Envelope.ID != id {
							t.Errorf("the handler saw an id of %d bytes, want the %d sent", len(m.Envelope.ID), n)
						}
						attempts <- m.Envelope.Attempt
						return tc.decide
					}, acemq.ConsumerConfig{Retry: tc.policy})
					publishWithID(r, q, id, `{"id":"long"}`)
					c := r.pull(q + ".dlq")
					if c.Envelope.ID != id {
						t.Fatalf("the copy in %s.dlq has an id of %d bytes, want the whole %d", q, len(c.Envelope.ID), n)
					}
					if c.MessageID != "" {
						t.Fatalf("the copy carries a message_id property of %d bytes, want none", len(c.MessageID))
					}
					for _, want := range []string{tc.reason, fmt.Sprintf("the message id is %d bytes", n), "x-acemq-id header"} {
						if !strings.Contains(c.Envelope.Error, want) {
							t.Fatalf("x-acemq-error %q does not say %q", c.Envelope.Error, want)
						}
					}
					if string(c.Body) != `{"id":"long"}` {
						t.Fatalf("the copy's body is %q", c.Body)
					}
					r.waitReady(q, 0)
					// Replayed from the dlq (replay, acemq dlq replay), it
					// travels the same way.
					raw := c.Raw("", q+".replayed")
					if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q+".replayed", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
						t.Fatal(err)
					}
					r.made = append(r.made, q+".replayed")
					if err := r.c.PublishRaw(context.Background(), raw); err != nil {
						t.Fatalf("replaying the copy: %.300v", err)
					}
					if back := r.pull(q + ".replayed"); back.Envelope.ID != id {
						t.Fatalf("the replayed copy has an id of %d bytes", len(back.Envelope.ID))
					}
					if got := calls.Load(); got != tc.calls {
						t.Fatalf("the handler ran %d times, want %d", got, tc.calls)
					}
					for i := 1; i <= int(tc.calls); i++ {
						if a := <-attempts; a != i {
							t.Fatalf("call %d saw attempt %d", i, a)
						}
					}
				})
			})
		}
	}
}

// A publish whose message id (or another short string) is over 255 bytes
// is refused before writing, and the refusal names that problem: it used
// to advise changing a header's value to a string, number or bool.
func TestAShortStringOver255BytesIsRefusedNamingTheRealProblem(t *testing.T) {
	onEveryFrameWriter(t, func(t *testing.T, r *rig) {
		q := r.named("shortstr")
		r.queue(q)
		err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, MessageID: longID(256), Body: []byte("x")})
		var pe *acemq.PublishError
		if !errors.As(err, &pe) || pe.Sent || !errors.Is(err, transport.ErrShortString) {
			t.Fatalf("PublishRaw with a 256-byte message id: %v; want an unsent PublishError matching transport.ErrShortString", err)
		}
		if !strings.Contains(pe.Reason, "the message id is 256 bytes") || !strings.Contains(pe.Reason, "at most 255 bytes") || strings.Contains(pe.Reason, "header's value") {
			t.Fatalf("the refusal says %q; want it to name the long message id and the 255-byte limit, and nothing about header values", pe.Reason)
		}
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, MessageID: longID(255), Body: []byte("x")}); err != nil {
			t.Fatalf("a 255-byte message id: %v", err)
		}
	})
}

// When the broker refuses a set-aside copy for any other reason (here
// {q}.dlq is full and refuses publishes), the last resort is a minimal
// copy in {q}.parked: the body, the whole id, the reason, and what it left
// out. It used to be held 5 s and requeued, for ever, on a queue without
// dead-letter wiring.
func TestACopyTheBrokerRefusesEndsAsAMinimalCopyInParked(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("refused")
		full := acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": int64(0), "x-overflow": "reject-publish"}}
		tp := acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum}).
			Queue(q+".dlq", full).Queue(q+".parked", acemq.QueueOptions{Type: acemq.Classic})
		if err := r.c.Apply(context.Background(), tp); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			calls.Add(1)
			return acemq.Reject(errors.New("no"))
		}, acemq.ConsumerConfig{NoDeadLetterDeclaration: true})
		id := longID(60000)
		publishWithID(r, q, id, `{"id":"refused"}`, map[string]any{"x-tenant": "t1"})
		c := r.pull(q + ".parked")
		if c.Envelope.ID != id {
			t.Fatalf("the minimal copy has an id of %d bytes, want the whole %d", len(c.Envelope.ID), len(id))
		}
		for _, want := range []string{"the handler rejected it: no", "this is a minimal copy: the copy to " + q + ".dlq was refused (", `"x-tenant"`, "the message id is 60000 bytes"} {
			if !strings.Contains(c.Envelope.Error, want) {
				t.Fatalf("x-acemq-error %q does not say %q", c.Envelope.Error, want)
			}
		}
		if _, kept := c.Envelope.Header("x-tenant"); kept || string(c.Body) != `{"id":"refused"}` {
			t.Fatalf("the minimal copy kept x-tenant (%v) or lost the body (%q)", kept, c.Body)
		}
		if f := r.nextFallback(); f.Kind != "set_aside_failed" || f.Target != q+".dlq" {
			t.Fatalf("fallback %+v, want set_aside_failed for %s.dlq", f, q)
		}
		r.waitReady(q, 0)
		r.waitReady(q+".dlq", 0)
		if got := calls.Load(); got != 1 {
			t.Fatalf("the handler ran %d times, want once", got)
		}
	})
}

// A RawMessage whose MessageID is the id in its x-acemq-id header, too
// long for the property (a pattern forwarding a message from elsewhere:
// a routing slip's next hop, an outbox record), is sent with the id in the
// header only; a long MessageID the header does not carry is refused.
func TestARawMessageWithALongIDTravelsInItsHeader(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("rawlong")
		r.queue(q)
		id := longID(60000)
		h := acemq.NewEnvelope().WireHeaders()
		h["x-acemq-id"] = id
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, MessageID: id, Headers: h, Body: []byte("x")}); err != nil {
			t.Fatalf("PublishRaw with the header's long id as MessageID: %.300v", err)
		}
		if m := r.pull(q); m.Envelope.ID != id || m.MessageID != "" {
			t.Fatalf("the message arrived with an id of %d bytes and a message_id of %d", len(m.Envelope.ID), len(m.MessageID))
		}
		h["x-acemq-id"] = "another"
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, MessageID: id, Headers: h, Body: []byte("x")}); !errors.Is(err, transport.ErrShortString) {
			t.Fatalf("PublishRaw with a long MessageID its header does not carry: %.300v, want a refusal matching ErrShortString", err)
		}
	})
}
