package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/cmd/acemq/internal/tracecheck"
)

// `acemq dlq replay` continues the message's trace (README, observability;
// contract §5.4): a message retried through its rung, dead-lettered,
// replayed and consumed again leaves one trace, the publish's, and each
// process span's parent is the span named by its delivery's traceparent.
// On RabbitMQ the built command replays; on memory:// (a broker of this
// process alone) the command's replayQueue does.
func TestDLQReplayContinuesTheMessagesTrace(t *testing.T) {
	for _, broker := range []string{"memory", "rabbitmq"} {
		t.Run(broker, func(t *testing.T) {
			ctx := context.Background()
			url := "memory://dlq-trace"
			if broker == "rabbitmq" {
				url = testenv.AMQPURL(t)
			}
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			settled := make(chan acemq.Settlement, 10)
			app, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp,
				OnSettlement: func(s acemq.Settlement) { settled <- s }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = app.Close(context.Background()) })
			q := testenv.Unique("cli-trace")
			if err := app.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
				t.Fatal(err)
			}
			deleteQueues(t, app, q, q+".dlq", q+".parked", acemq.RetryQueue(q, time.Second))
			var calls tracecheck.Log
			k, err := acemq.Consume(ctx, app, q, func(ctx context.Context, m *acemq.Message[map[string]any]) acemq.Decision {
				calls.Add(ctx, m.Envelope)
				if acemq.ReplayCount(m.Envelope) > 0 {
					return acemq.Accept()
				}
				return acemq.Retry(errors.New("not yet"))
			}, acemq.ConsumerConfig{Retry: acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Close(context.Background()) })
			next := func(want acemq.Outcome) {
				t.Helper()
				select {
				case s := <-settled:
					if s.Outcome != want {
						t.Fatalf("settlement %+v, want %s", s, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no settlement arrived; want %s", want)
				}
			}
			if _, err := app.Publish(ctx, "", q, map[string]any{"order": "o-1"}, acemq.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			next(acemq.ConsumeRetried)
			next(acemq.ConsumeDeadLettered)
			deadline := time.Now().Add(10 * time.Second)
			for depth(t, app, q+".dlq") != 1 { // the settlement is reported before the copy is made
				if time.Now().After(deadline) {
					t.Fatalf("%s.dlq never held the dead-lettered copy", q)
				}
				time.Sleep(5 * time.Millisecond) // polling: the broker has no event for it
			}
			if broker == "rabbitmq" {
				run0(t, "", "dlq", "replay", q+".dlq", "--url", url)
			} else if rep, err := replayQueue(ctx, app, q+".dlq", replayOptions{}); err != nil || rep.Moved != 1 {
				t.Fatalf("replayQueue: %+v, %v", rep, err)
			}
			next(acemq.ConsumeAcked)

			tracecheck.OneTrace(t, spans, func(s sdktrace.ReadOnlySpan) bool { return s.SpanKind() == trace.SpanKindConsumer }, &calls, []int64{1, 2, 1})
		})
	}
}
