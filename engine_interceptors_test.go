package acemq_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
)

// Config.ConsumeInterceptors run before ConsumerConfig.ConsumeInterceptors,
// each list in its order, every one sees what the ones before it left, and
// the handler sees the envelope the last one left (consume.go, config.go).
func TestConsumeInterceptorsRunTheConnsThenTheConsumersAndTheHandlerSeesTheirChanges(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	// step records that name ran and the trail it saw (the names of the
	// ones that ran before it), then adds itself to the trail and to the
	// envelope's type.
	step := func(name string) acemq.ConsumeInterceptor {
		return func(ctx context.Context, in *acemq.Inbound) error {
			v, _ := in.Envelope.Header("trail")
			before, _ := v.(string)
			mu.Lock()
			ran = append(ran, name+" after ["+before+"]")
			mu.Unlock()
			trail := name
			if before != "" {
				trail = before + ">" + name
			}
			e, err := in.Envelope.WithHeader("trail", trail)
			if err != nil {
				return err
			}
			e.Type += "+" + name
			in.Envelope = e
			return nil
		}
	}
	conns := []acemq.ConsumeInterceptor{step("conn-1"), step("conn-2")}
	onEveryRig(t, func(t *testing.T, r *rig) {
		mu.Lock()
		ran = nil
		mu.Unlock()
		q := r.named("icpt-consume")
		r.queue(q)
		seen := make(chan acemq.Envelope, 1)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			seen <- m.Envelope
			return acemq.Accept()
		}, acemq.ConsumerConfig{ConsumeInterceptors: []acemq.ConsumeInterceptor{
			step("consumer-1"), step("consumer-2"),
		}})
		sent := r.send(q, order{ID: "o-1"}, acemq.SendOptions{Type: "order"})
		env := recv(t, seen)
		mu.Lock()
		calls := slices.Clone(ran)
		mu.Unlock()
		if want := []string{"conn-1 after []", "conn-2 after [conn-1]", "consumer-1 after [conn-1>conn-2]", "consumer-2 after [conn-1>conn-2>consumer-1]"}; !slices.Equal(calls, want) {
			t.Errorf("interceptors ran %q, want %q (the Conn's, then the consumer's)", calls, want)
		}
		trail, _ := env.Header("trail")
		if trail != "conn-1>conn-2>consumer-1>consumer-2" || env.Type != "order+conn-1+conn-2+consumer-1+consumer-2" || env.ID != sent.Envelope.ID {
			t.Errorf("the handler saw trail %v, type %q, id %s; want every interceptor's change on message %s", trail, env.Type, env.ID, sent.Envelope.ID)
		}
		if s := r.nextSettlement(); s.Outcome != acemq.ConsumeAcked {
			t.Errorf("settled %s, want acked", s.Outcome)
		}
	}, acemq.Config{ConsumeInterceptors: conns})
}

// What a publish interceptor leaves is what is sent (config.go,
// publisher.go): the destination, envelope, payload and flags it set reach
// the transport exactly (read at the seam), the broker (read back raw), the
// Sent the caller gets and the publish span; the second interceptor sees
// what the first left.
func TestPublishInterceptorChangesAreExactlyWhatReachesTheWireTheResultAndTheSpan(t *testing.T) {
	for _, rabbit := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "rabbitmq"}[rabbit], func(t *testing.T) {
			ctx := context.Background()
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			var moved string // the queue the first interceptor sends to
			first := func(ctx context.Context, p *acemq.PublishContext) error {
				p.RoutingKey = moved
				p.Envelope.Type = "order.moved"
				p.Envelope.CorrelationID = "corr-moved"
				p.Envelope.CausationID = "cause-7"
				p.Payload = order{ID: "rewritten"}
				p.Persistent = false
				p.Mandatory = true
				return p.SetHeader("tenant", "t-7")
			}
			var secondSaw acemq.PublishContext
			second := func(ctx context.Context, p *acemq.PublishContext) error {
				secondSaw = *p
				return p.SetHeader("checked-by", "second")
			}
			s := &seam{release: 1}
			r := seamRig(t, rabbit, s, acemq.Config{PublishInterceptors: []acemq.PublishInterceptor{first, second}, TracerProvider: tp})
			q, moved0 := r.named("icpt-publish"), r.named("icpt-moved")
			moved = moved0
			r.queue(q)
			r.queue(moved)

			sent, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).Send(ctx, order{ID: "original"})
			if err != nil {
				t.Fatal(err)
			}
			if secondSaw.RoutingKey != moved || secondSaw.Envelope.Type != "order.moved" || secondSaw.Payload != (order{ID: "rewritten"}) {
				t.Errorf("the second interceptor saw %+v, want the first's changes", secondSaw)
			}
			id := sent.Envelope.ID
			if sent.RoutingKey != moved || sent.Envelope.Type != "order.moved" || sent.Envelope.CorrelationID != "corr-moved" || !sent.Mandatory {
				t.Errorf("Sent %+v, want the interceptors' destination, envelope and mandatory flag", sent)
			}

			// At the transport: exactly one write, as the interceptors left it.
			ws := s.writes()
			if len(ws) != 1 {
				t.Fatalf("%d writes reached the transport, want 1", len(ws))
			}
			w := ws[0]
			wantHeaders := map[string]any{
				"x-acemq-type": "order.moved", "x-acemq-correlation": "corr-moved", "x-acemq-causation": "cause-7",
				"x-acemq-id": id, "tenant": "t-7", "checked-by": "second",
			}
			if w.Exchange != "" || w.RoutingKey != moved || !w.Mandatory || w.DeliveryMode != 1 || w.MessageID != id || !bodyIs(w.Body, "rewritten") {
				t.Errorf("written %q/%q mandatory %v mode %d id %s body %s; want the interceptors' destination, mandatory, transient, id %s and payload", w.Exchange, w.RoutingKey, w.Mandatory, w.DeliveryMode, w.MessageID, w.Body, id)
			}
			checkHeaders(t, "written", w.Headers, wantHeaders)

			// In the broker, read back raw: nothing in the original queue.
			got := r.pull(moved)
			if got.RoutingKey != moved || !bodyIs(got.Body, "rewritten") {
				t.Errorf("the broker holds %q with body %s, want the rewritten payload routed to %s", got.RoutingKey, got.Body, moved)
			}
			checkHeaders(t, "read back", got.Headers, wantHeaders)
			if n := r.ready(q); n != 0 {
				t.Errorf("%s holds %d messages; the interceptor moved the publish away from it", q, n)
			}

			// The span: named for the destination the interceptor chose,
			// with its envelope, and its context is the traceparent sent.
			var pub []sdktrace.ReadOnlySpan
			for _, sp := range spans.Ended() {
				if sp.SpanKind() == trace.SpanKindProducer {
					pub = append(pub, sp)
				}
			}
			if len(pub) != 1 || pub[0].Name() != moved+" publish" {
				t.Fatalf("publish spans %v, want one named %q", names(pub), moved+" publish")
			}
			for k, v := range map[string]string{
				"messaging.destination.name":                 moved,
				"messaging.rabbitmq.destination.routing_key": moved,
				"messaging.message.id":                       id,
				"messaging.acemq.message_type":               "order.moved",
				"messaging.message.conversation_id":          "corr-moved",
				"messaging.acemq.outcome":                    "confirmed",
			} {
				if a, ok := spanAttr(pub[0], k); !ok || a.AsString() != v {
					t.Errorf("span %s = %v, want %q", k, a.String(), v)
				}
			}
			sc := pub[0].SpanContext()
			want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			if w.Headers["traceparent"] != want || got.Headers["traceparent"] != want {
				t.Errorf("traceparent written %v, read back %v; want the publish span's %s", w.Headers["traceparent"], got.Headers["traceparent"], want)
			}
		})
	}
}

func bodyIs(b []byte, id string) bool {
	var o order
	return json.Unmarshal(b, &o) == nil && o.ID == id
}

func checkHeaders(t *testing.T, where string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s header %s = %v, want %v", where, k, got[k], v)
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return strings.Join(n, ", ")
}
