package console_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// The console's replay action continues the message's trace (README,
// observability; contract §5.4): a message retried through its rung,
// dead-lettered, replayed from the console and consumed again leaves one
// trace, the publish's, and each process span's parent is the span named
// by its delivery's traceparent header.
func TestConsoleReplayContinuesTheMessagesTrace(t *testing.T) {
	for _, name := range []string{"memory", "rabbitmq"} {
		t.Run(name, func(t *testing.T) {
			u := memURL(t)
			if name == "rabbitmq" {
				u = testenv.AMQPURL(t)
			}
			ctx := context.Background()
			f := newFixture(t, u, nil)
			q := seedQueue(t, f.conn)
			dlq := acemq.DeadLetterQueue(q)
			policy := acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)
			t.Cleanup(func() { _, _ = f.conn.DeleteQueue(context.Background(), acemq.RetryQueue(q, time.Second)) })

			// The application: its own Conn, traced.
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			settled := make(chan acemq.Settlement, 10)
			app, err := acemq.Connect(ctx, u, acemq.Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp,
				OnSettlement: func(s acemq.Settlement) { settled <- s }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = app.Close(context.Background()) })
			type seen struct {
				attempt     int
				traceparent string
				span        trace.SpanContext
			}
			var mu sync.Mutex
			var calls []seen
			k, err := acemq.Consume(ctx, app, q, func(ctx context.Context, m *acemq.Message[map[string]any]) acemq.Decision {
				v, _ := m.Envelope.Header("traceparent")
				parent, _ := v.(string)
				mu.Lock()
				calls = append(calls, seen{m.Envelope.Attempt, parent, trace.SpanContextFromContext(ctx)})
				mu.Unlock()
				if acemq.ReplayCount(m.Envelope) > 0 {
					return acemq.Accept()
				}
				return acemq.Retry(errors.New("not yet"))
			}, acemq.ConsumerConfig{Retry: policy})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close(context.Background()) })
			next := func() acemq.Settlement {
				t.Helper()
				select {
				case s := <-settled:
					return s
				case <-time.After(10 * time.Second):
					t.Fatal("no settlement arrived")
				}
				return acemq.Settlement{}
			}
			if _, err := app.Publish(ctx, "", q, map[string]any{"order": "o-1"}, acemq.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			if s := next(); s.Outcome != acemq.ConsumeRetried || s.Target != acemq.RetryQueue(q, time.Second) {
				t.Fatalf("first settlement %+v, want retried through the 1s rung", s)
			}
			if s := next(); s.Outcome != acemq.ConsumeDeadLettered {
				t.Fatalf("second settlement %+v, want dead_lettered", s)
			}
			// The settlement is reported before the copy is made.
			deadline := time.Now().Add(10 * time.Second)
			for depth(t, f.conn, dlq) != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("%s never held the dead-lettered copy", dlq)
				}
				time.Sleep(5 * time.Millisecond) // polling: the broker has no event for it
			}

			resp, body := f.post("/q/"+dlq+"/replay", url.Values{"confirm": {"yes"}})
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, "moved 1, skipped 0") {
				t.Fatalf("replay: %d %s", resp.StatusCode, body)
			}
			if s := next(); s.Outcome != acemq.ConsumeAcked {
				t.Fatalf("after the replay: %+v, want acked", s)
			}

			var pubs, procs []sdktrace.ReadOnlySpan
			for deadline := time.Now().Add(10 * time.Second); ; {
				pubs, procs = nil, nil
				for _, s := range spans.Ended() {
					switch {
					case s.SpanKind() == trace.SpanKindProducer:
						pubs = append(pubs, s)
					case s.Name() == q+" process":
						procs = append(procs, s)
					}
				}
				if len(procs) >= 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d process spans ended, want 3", len(procs))
				}
				time.Sleep(5 * time.Millisecond) // the span ends just after the settlement is reported
			}
			if len(pubs) != 1 || len(procs) != 3 {
				t.Fatalf("%d publish and %d process spans, want 1 and 3", len(pubs), len(procs))
			}
			traceID := pubs[0].SpanContext().TraceID()
			for _, s := range spans.Ended() {
				if s.SpanContext().TraceID() != traceID {
					t.Errorf("span %q is in trace %s, not the publish's %s", s.Name(), s.SpanContext().TraceID(), traceID)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i, s := range procs {
				var attempt int64
				for _, kv := range s.Attributes() {
					if kv.Key == "messaging.acemq.attempt" {
						attempt = kv.Value.AsInt64()
					}
				}
				if want := []int64{1, 2, 1}[i]; attempt != want || calls[i].attempt != int(want) {
					t.Errorf("process span %d has attempt %d (the handler saw %d), want %d", i+1, attempt, calls[i].attempt, want)
				}
				p := s.Parent()
				if want := "00-" + p.TraceID().String() + "-" + p.SpanID().String() + "-01"; !p.IsRemote() || calls[i].traceparent != want {
					t.Errorf("process span %d: parent %s (remote %v), but its delivery's traceparent is %q", i+1, want, p.IsRemote(), calls[i].traceparent)
				}
				if calls[i].span.SpanID() != s.SpanContext().SpanID() {
					t.Errorf("handler %d ran in span %s, not its process span %s", i+1, calls[i].span.SpanID(), s.SpanContext().SpanID())
				}
			}
		})
	}
}
