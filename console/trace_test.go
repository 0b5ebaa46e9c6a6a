package console_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/testenv"
	"github.com/acemq-go/acemq/console/internal/tracecheck"
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
			var calls tracecheck.Log
			k, err := acemq.Consume(ctx, app, q, func(ctx context.Context, m *acemq.Message[map[string]any]) acemq.Decision {
				calls.Add(ctx, m.Envelope)
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

			tracecheck.OneTrace(t, spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == q+" process" }, &calls, []int64{1, 2, 1})
		})
	}
}
