package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/brokertest"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/outbox/internal/testenv"
	"github.com/acemq-go/acemq/replay"
)

// A message written to the outbox stays in the trace of the work that
// wrote it through its whole life (README, observability; contract §5.4):
// the relay's publish, the consumer's attempts, the retry through its
// rung, the dead-letter queue and a replay. The relay's publish span and
// every process span are in that trace; each process span's parent is the
// span named by its delivery's traceparent header, with the attempt on it.
func TestAnOutboxMessageStaysInTheTraceOfTheWorkThatWroteItThroughRetryDeadLetterAndReplay(t *testing.T) {
	for _, broker := range []string{"memory", "rabbitmq"} {
		t.Run(broker, func(t *testing.T) {
			ctx := context.Background()
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			url := "memory://outbox-trace-" + dbtest.RandHex(6)
			if broker == "rabbitmq" {
				url = testenv.AMQPURL(t)
			}
			settled := make(chan acemq.Settlement, 10)
			c := brokertest.Connect(t, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp,
				OnSettlement: func(s acemq.Settlement) { settled <- s }})
			q := brokertest.Queue(t, c, "outbox-trace")
			policy := acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)
			t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), acemq.RetryQueue(q, time.Second)) })
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
			type seen struct {
				attempt int
				parent  string
				span    trace.SpanContext
			}
			var mu sync.Mutex
			var calls []seen
			k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
				v, _ := m.Envelope.Header("traceparent")
				p, _ := v.(string)
				mu.Lock()
				calls = append(calls, seen{m.Envelope.Attempt, p, trace.SpanContextFromContext(ctx)})
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

			// The work that writes the record, in a span of its own.
			s := newStore(t, backendNamed(t, "sqlite"))
			wctx, work := tp.Tracer("test").Start(ctx, "place order")
			tx, err := s.DB().BeginTx(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Add(wctx, tx, c, "", q, order{"o-1", 1}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			work.End()

			r := newRelay(t, c, s, WithTracerProvider(tp))
			if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Published != 1 {
				t.Fatalf("sweep %+v", sw)
			}
			next(acemq.ConsumeRetried)
			next(acemq.ConsumeDeadLettered)
			brokertest.Eventually(t, "the dead-lettered copy is in "+acemq.DeadLetterQueue(q), func() bool {
				return brokertest.Depth(t, c, acemq.DeadLetterQueue(q)) == 1
			})
			if rep, err := replay.Queue(ctx, c, acemq.DeadLetterQueue(q)); err != nil || rep.Moved != 1 {
				t.Fatalf("replay %+v, %v", rep, err)
			}
			next(acemq.ConsumeAcked)

			var pubs, procs []sdktrace.ReadOnlySpan
			brokertest.Eventually(t, "three process spans have ended", func() bool {
				pubs, procs = nil, nil
				for _, sp := range spans.Ended() {
					switch sp.SpanKind() {
					case trace.SpanKindProducer:
						pubs = append(pubs, sp)
					case trace.SpanKindConsumer:
						procs = append(procs, sp)
					}
				}
				return len(procs) == 3
			})
			traceID := work.SpanContext().TraceID()
			for _, sp := range spans.Ended() {
				if sp.SpanContext().TraceID() != traceID {
					t.Errorf("span %q is in trace %s, not the writing work's %s", sp.Name(), sp.SpanContext().TraceID(), traceID)
				}
			}
			if len(pubs) != 1 || pubs[0].Parent().SpanID() != work.SpanContext().SpanID() {
				t.Fatalf("%d publish spans (want the relay's one), parent %v; want the writing work's span %s", len(pubs), pubs, work.SpanContext().SpanID())
			}
			mu.Lock()
			defer mu.Unlock()
			for i, sp := range procs {
				var attempt int64
				for _, kv := range sp.Attributes() {
					if kv.Key == "messaging.acemq.attempt" {
						attempt = kv.Value.AsInt64()
					}
				}
				if want := []int64{1, 2, 1}[i]; attempt != want || calls[i].attempt != int(want) {
					t.Errorf("process span %d has attempt %d (the handler saw %d), want %d", i+1, attempt, calls[i].attempt, want)
				}
				p := sp.Parent()
				if want := "00-" + p.TraceID().String() + "-" + p.SpanID().String() + "-01"; !p.IsRemote() || calls[i].parent != want {
					t.Errorf("process span %d: parent %s (remote %v), but its delivery's traceparent is %q", i+1, want, p.IsRemote(), calls[i].parent)
				}
				if calls[i].span.SpanID() != sp.SpanContext().SpanID() {
					t.Errorf("handler %d ran in span %s, not its process span %s", i+1, calls[i].span.SpanID(), sp.SpanContext().SpanID())
				}
			}
		})
	}
}
