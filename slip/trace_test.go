package slip

import (
	"context"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// A routing slip's hops stay in the trace of the message that started the
// run (README, observability; contract §5.4): every step's process span is
// in Start's publish trace, and its parent is the span named by the
// traceparent header of the delivery it processed.
func TestASlipsHopsStayInTheTraceOfItsStart(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		c := brokertest.Connect(t, url, acemq.Config{TracerProvider: tp})
		a, b, end := brokertest.Queue(t, c, "slip-trace"), brokertest.Queue(t, c, "slip-trace"), brokertest.Queue(t, c, "slip-trace")
		type seen struct {
			parent string
			span   trace.SpanContext
		}
		var mu sync.Mutex
		calls := map[string]seen{}
		for _, q := range []string{a, b, end} {
			k, err := acemq.Consume(context.Background(), c, q, Follow(c, func(ctx context.Context, m *acemq.Message[map[string]string]) acemq.Decision {
				v, _ := m.Envelope.Header("traceparent")
				p, _ := v.(string)
				mu.Lock()
				calls[q] = seen{p, trace.SpanContextFromContext(ctx)}
				mu.Unlock()
				return acemq.Accept()
			}), acemq.ConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close(context.Background()) })
		}
		s, err := New(To("", a, "validate"), To("", b, "charge"), To("", end, "archive"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Start(context.Background(), c, s, map[string]string{"order": "o-1"}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		procs := map[string]sdktrace.ReadOnlySpan{}
		var pubs []sdktrace.ReadOnlySpan
		brokertest.Eventually(t, "every step's process span has ended", func() bool {
			pubs, procs = nil, map[string]sdktrace.ReadOnlySpan{}
			for _, sp := range spans.Ended() {
				switch sp.SpanKind() {
				case trace.SpanKindProducer:
					pubs = append(pubs, sp)
				case trace.SpanKindConsumer:
					procs[sp.Name()] = sp
				}
			}
			return len(procs) == 3
		})
		if len(pubs) != 1 || pubs[0].Name() != a+" publish" {
			t.Fatalf("%d publish spans, want Start's one (hops start none)", len(pubs))
		}
		traceID := pubs[0].SpanContext().TraceID()
		for _, sp := range spans.Ended() {
			if sp.SpanContext().TraceID() != traceID {
				t.Errorf("span %q is in trace %s, not Start's %s", sp.Name(), sp.SpanContext().TraceID(), traceID)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, q := range []string{a, b, end} {
			sp, ok := procs[q+" process"]
			if !ok {
				t.Fatalf("no process span for step %s", q)
			}
			p := sp.Parent()
			if want := "00-" + p.TraceID().String() + "-" + p.SpanID().String() + "-01"; !p.IsRemote() || calls[q].parent != want {
				t.Errorf("step %s: parent %s (remote %v), but its delivery's traceparent is %q", q, want, p.IsRemote(), calls[q].parent)
			}
			if calls[q].span.SpanID() != sp.SpanContext().SpanID() {
				t.Errorf("step %s's handler ran in span %s, not its process span %s", q, calls[q].span.SpanID(), sp.SpanContext().SpanID())
			}
		}
	})
}
