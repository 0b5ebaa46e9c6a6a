package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// The decision tests run on memory:// and RabbitMQ alike (onEveryRig):
// how a decision is settled is the engine's, not the broker's.

// decide starts a consumer on q whose handler answers every message with
// d, and returns the channel of messages the handler saw.
func decide(r *rig, q string, d func(m *acemq.Message[order]) acemq.Decision, opts ...acemq.ConsumerConfig) <-chan *acemq.Message[order] {
	seen := make(chan *acemq.Message[order], 100)
	consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		seen <- m
		return d(m)
	}, opts...)
	return seen
}

// assertOne checks the next settlement's outcome, target and reason, and
// that it is the only one for the delivery.
func assertOne(t *testing.T, r *rig, id string, outcome acemq.Outcome, target, reason string) acemq.Settlement {
	t.Helper()
	s := r.nextSettlement()
	if s.Envelope.ID != id || s.Outcome != outcome || s.Target != target || s.Reason != reason {
		t.Fatalf("settlement = {id %s outcome %q target %q reason %q}, want {id %s outcome %q target %q reason %q}",
			s.Envelope.ID, s.Outcome, s.Target, s.Reason, id, outcome, target, reason)
	}
	r.noMoreSettlements(50 * time.Millisecond)
	return s
}

func TestAcceptAcksAndEmptiesTheQueue(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Accept() })
		sent := r.send(q, order{ID: "a"})
		if sent.Outcome != acemq.OutcomeConfirmed {
			t.Fatalf("outcome %q, want confirmed", sent.Outcome)
		}
		s := assertOne(t, r, sent.Envelope.ID, acemq.ConsumeAcked, "", "")
		if !s.Handled {
			t.Error("Handled is false for a handled delivery")
		}
		r.waitReady(q, 0)
		if r.ready(q+".dlq") != 0 || r.ready(q+".parked") != 0 {
			t.Fatal("an accepted message was set aside")
		}
	})
}

func TestRejectDeadLettersWithReasonBodyIDAndAppHeaders(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Reject(errors.New("no such customer")) })
		// Published raw so it can carry the broker's own x-death header, which
		// a set-aside copy must not keep.
		env := acemq.NewEnvelope()
		env.Type = "order"
		env, err := env.WithHeader("x-tenant", "acme")
		if err != nil {
			t.Fatal(err)
		}
		h := env.WireHeaders()
		h["x-death"] = []any{transport.Table{"queue": "elsewhere", "reason": "rejected", "count": int64(1)}}
		h["x-first-death-queue"] = "elsewhere"
		body := []byte(`{"id":"r-1"}`)
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: q, ContentType: "application/json", MessageID: env.ID, Headers: h, Body: body,
		}); err != nil {
			t.Fatal(err)
		}
		assertOne(t, r, env.ID, acemq.ConsumeRejected, q+".dlq", "the handler rejected it: no such customer")
		m := r.pull(q + ".dlq")
		if m.Envelope.Error != "the handler rejected it: no such customer" {
			t.Errorf("x-acemq-error = %q", m.Envelope.Error)
		}
		if string(m.Body) != string(body) || m.ContentType != "application/json" {
			t.Errorf("body %q content type %q: not the original", m.Body, m.ContentType)
		}
		if m.Envelope.ID != env.ID || m.Envelope.Attempt != 1 {
			t.Errorf("id %s attempt %d, want %s attempt 1", m.Envelope.ID, m.Envelope.Attempt, env.ID)
		}
		if v, _ := m.Envelope.Header("x-tenant"); v != "acme" {
			t.Errorf("application header x-tenant = %v, want acme", v)
		}
		for _, name := range []string{"x-death", "x-first-death-queue"} {
			if _, ok := m.Headers[name]; ok {
				t.Errorf("the set-aside copy carries the broker's %s header", name)
			}
		}
		r.waitReady(q, 0)
	})
}

func TestParkSetsAsideToParkedWithReason(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Park(errors.New("needs a human")) })
		sent := r.send(q, order{ID: "p"})
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeParked, q+".parked", "the handler parked it: needs a human")
		m := r.pull(q + ".parked")
		if m.Envelope.Error != "the handler parked it: needs a human" || m.Envelope.ID != sent.Envelope.ID {
			t.Fatalf("parked copy: id %s error %q", m.Envelope.ID, m.Envelope.Error)
		}
		if r.ready(q+".dlq") != 0 {
			t.Fatal("a parked message also went to the dlq")
		}
	})
}

func TestHandlerPanicRejectsWithPanicReason(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		decide(r, q, func(*acemq.Message[order]) acemq.Decision { panic("nil map") })
		sent := r.send(q, order{ID: "x"})
		want := "the handler rejected it: acemq: the handler panicked on message " + sent.Envelope.ID + ": nil map"
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeRejected, q+".dlq", want)
		if m := r.pull(q + ".dlq"); m.Envelope.Error != want {
			t.Fatalf("x-acemq-error = %q, want %q", m.Envelope.Error, want)
		}
	})
}

func TestRetryWithFatalErrorRejectsAtOnce(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision {
			return acemq.Retry(acemq.Fatal(errors.New("schema mismatch")))
		}, acemq.ConsumerConfig{Retry: acemq.Fixed(5, time.Millisecond)})
		sent := r.send(q, order{ID: "f"})
		want := "the handler reported an unprocessable message: schema mismatch"
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeRejected, q+".dlq", want)
		if m := r.pull(q + ".dlq"); m.Envelope.Error != want || m.Envelope.Attempt != 1 {
			t.Fatalf("dlq copy: attempt %d error %q", m.Envelope.Attempt, m.Envelope.Error)
		}
		if n := len(seen); n != 1 {
			t.Fatalf("the handler ran %d times, want 1", n)
		}
	})
}

func TestZeroDecisionRejectsWithNoDecisionReason(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Decision{} })
		sent := r.send(q, order{ID: "z"})
		want := "the handler rejected it: the handler returned no decision"
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeRejected, q+".dlq", want)
		if m := r.pull(q + ".dlq"); m.Envelope.Error != want {
			t.Fatalf("x-acemq-error = %q", m.Envelope.Error)
		}
	})
}

func TestUndecodableBodyIsParkedWithoutRunningTheHandler(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Accept() })
		env := acemq.NewEnvelope()
		body := []byte(`{"id":`)
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: q, ContentType: "application/json", MessageID: env.ID, Headers: env.WireHeaders(), Body: body,
		}); err != nil {
			t.Fatal(err)
		}
		s := r.nextSettlement()
		if s.Outcome != acemq.ConsumeParked || s.Target != q+".parked" || s.Handled {
			t.Fatalf("settlement %+v, want parked to %s.parked, not handled", s, q)
		}
		const prefix = "could not be decoded: "
		if len(s.Reason) <= len(prefix) || s.Reason[:len(prefix)] != prefix {
			t.Fatalf("reason %q does not start %q", s.Reason, prefix)
		}
		m := r.pull(q + ".parked")
		if m.Envelope.Error != s.Reason || string(m.Body) != string(body) {
			t.Fatalf("parked copy: error %q body %q", m.Envelope.Error, m.Body)
		}
		if len(seen) != 0 {
			t.Fatal("the handler ran on an undecodable body")
		}
		r.noMoreSettlements(50 * time.Millisecond)
	})
}

func TestConsumeInterceptorErrorDeadLetters(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{ConsumeInterceptors: []acemq.ConsumeInterceptor{func(ctx context.Context, in *acemq.Inbound) error {
			return errors.New("bad signature")
		}}})
		sent := r.send(q, order{ID: "i"})
		s := assertOne(t, r, sent.Envelope.ID, acemq.ConsumeDeadLettered, q+".dlq", "an interceptor refused it: bad signature")
		if s.Handled {
			t.Error("Handled is true for an interceptor refusal")
		}
		if m := r.pull(q + ".dlq"); m.Envelope.Error != "an interceptor refused it: bad signature" {
			t.Fatalf("x-acemq-error = %q", m.Envelope.Error)
		}
		if len(seen) != 0 {
			t.Fatal("the handler ran after an interceptor refused the message")
		}
	})
}

func TestInProgressPutsBackWithTheSameAttempt(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		calls := 0
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision {
			calls++ // one handler goroutine (concurrency 1)
			if calls == 1 {
				return acemq.InProgress(20 * time.Millisecond)
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
		sent := r.send(q, order{ID: "ip"})
		s := r.nextSettlement()
		if s.Outcome != acemq.ConsumeInProgress || s.Target != q || s.RetryDelay != 20*time.Millisecond {
			t.Fatalf("first settlement %+v, want in_progress to %s after 20ms", s, q)
		}
		if s2 := r.nextSettlement(); s2.Outcome != acemq.ConsumeAcked {
			t.Fatalf("second settlement %q, want acked", s2.Outcome)
		}
		first, second := recv(t, seen), recv(t, seen)
		if first.Envelope.Attempt != 1 || second.Envelope.Attempt != 1 {
			t.Fatalf("attempts %d then %d, want 1 then 1", first.Envelope.Attempt, second.Envelope.Attempt)
		}
		if second.Envelope.ID != sent.Envelope.ID || second.Redelivered {
			t.Fatalf("put-back copy: id %s redelivered %v", second.Envelope.ID, second.Redelivered)
		}
		r.noMoreSettlements(50 * time.Millisecond)
		r.waitReady(q, 0)
		if r.ready(q+".dlq") != 0 {
			t.Fatal("an in-progress message was dead-lettered")
		}
	})
}
