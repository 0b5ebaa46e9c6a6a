package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

// A raw publish whose headers nest a plain map[string]any (what a caller
// filling RawMessage.Headers, a map[string]any, writes by hand) is
// written on every transport, and the Conn stays open: memory:// takes it,
// so RabbitMQ must too — or both refuse it as bad input, never as a lost
// connection.
func TestPublishRawWithANestedMapHeaderIsWrittenOnEveryTransport(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		q := r.named("q")
		r.queue(q)
		env := acemq.NewEnvelope()
		h := env.WireHeaders()
		h["x-meta"] = []any{map[string]any{"k": "v"}}
		if err := r.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, MessageID: env.ID, Headers: h, Body: []byte(`{}`)}); err != nil {
			t.Fatalf("PublishRaw with a nested map[string]any header: %v", err)
		}
		m := r.pull(q)
		if m.Envelope.ID != env.ID {
			t.Fatalf("pulled %s, want %s", m.Envelope.ID, env.ID)
		}
		if st := r.c.State(); st != acemq.StateOpen {
			t.Fatalf("state %s after the publish, want open", st)
		}
	})
}

// A header value AMQP 0-9-1 has no field type for (a struct, a complex) is
// bad input: Send, SendAll and PublishRaw refuse it saying which header and
// what to write instead, nothing reaches the queue, it is not reported as a
// lost connection or a pause (retrying cannot help), and the Conn stays
// open for the next publish. Before ErrUnencodable the engine took the
// transport's "nothing was written" for a lost connection.
func TestAHeaderWithNoAMQPFieldTypeIsRefusedAsBadInputNotALoss(t *testing.T) {
	type point struct{ X int }
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		q := r.named("q")
		r.queue(q)
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Fatalf("%s with an unencodable header: nil error", what)
			}
			if acemq.IsPaused(err) || acemq.IsRetryable(err) {
				t.Fatalf("%s: %v is reported as paused/retryable; it is bad input", what, err)
			}
			if !strings.Contains(err.Error(), "a header cannot be written") || !strings.Contains(err.Error(), `"x-bad"`) {
				t.Fatalf("%s: %v does not say which header cannot be written", what, err)
			}
			var pe *acemq.PublishError
			if !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeRefused {
				t.Fatalf("%s: %v: want a PublishError, not sent, outcome refused; got %+v", what, err, pe)
			}
		}
		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		_, err := pub.SendWith(ctx, order{ID: "a"}, acemq.SendOptions{Headers: map[string]any{"x-bad": point{X: 1}}})
		check("Send", err)
		_, err = pub.SendAllWith(ctx, []order{{ID: "b"}}, acemq.SendOptions{Headers: map[string]any{"x-bad": []any{complex(1, 2)}}})
		check("SendAll", err)
		env := acemq.NewEnvelope()
		h := env.WireHeaders()
		h["x-bad"] = map[string]any{"k": point{}}
		check("PublishRaw", r.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, MessageID: env.ID, Headers: h, Body: []byte(`{}`)}))
		if st := r.c.State(); st != acemq.StateOpen {
			t.Fatalf("state %s after the refusals, want open", st)
		}
		sent := r.send(q, order{ID: "ok"})
		if n := r.ready(q); n != 1 {
			t.Fatalf("%d messages ready after three refusals and one send, want 1", n)
		}
		if m := r.pull(q); m.Envelope.ID != sent.Envelope.ID {
			t.Fatalf("pulled %s, want the next publish %s", m.Envelope.ID, sent.Envelope.ID)
		}
	})
}
