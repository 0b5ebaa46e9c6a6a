package acemq_test

import (
	"context"
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
