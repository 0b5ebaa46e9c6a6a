package acemq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq-go/acemq"
)

// A top-level null application header ('V', nil) is an application
// header like any other (contract §1.1 "as given", §1.8 "application
// headers preserved"): the handler sees it in Headers and the set-aside
// copy carries it, as it carries a nested null. It was dropped from both.
func TestANullApplicationHeaderReachesTheHandlerAndTheSetAsideCopy(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Reject(errors.New("no")) })
		env := acemq.NewEnvelope()
		env.Type = "order"
		h := env.WireHeaders()
		h["x-null"] = nil
		h["x-nested"] = map[string]any{"inner": nil}
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: q, ContentType: "application/json", MessageID: env.ID, Headers: h, Body: []byte(`{"id":"n"}`),
		}); err != nil {
			t.Fatal(err)
		}
		m := <-seen
		if v, ok := m.Envelope.Headers()["x-null"]; !ok || v != nil {
			t.Errorf("the handler's Envelope.Headers() = %v: x-null is missing", m.Envelope.Headers())
		}
		c := r.pull(q + ".dlq")
		if v, ok := c.Envelope.Header("x-null"); !ok || v != nil {
			t.Errorf("the set-aside copy's headers = %v: x-null is missing", c.Envelope.Headers())
		}
		if _, ok := c.Envelope.Header("x-nested"); !ok {
			t.Errorf("the set-aside copy lost x-nested")
		}
	})
}
