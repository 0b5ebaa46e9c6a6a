package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/tracecheck"
	"github.com/acemq-go/acemq/replay"
)

// tracedRig is a rig whose Conn's spans go to an in-memory recorder.
func tracedRig(t *testing.T, rabbit bool) (*rig, *tracetest.SpanRecorder) {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := acemq.Config{TracerProvider: tp}
	if rabbit {
		return newRabbitRig(t, cfg), spans
	}
	return newRig(t, cfg), spans
}

// checkOneTrace asserts that every span recorded is in the trace of the
// one publish span, and that the process spans on queue are, in order,
// the deliveries seen: the attempt and outcome wanted, each one's parent
// the span named by its delivery's traceparent header (contract §5.4), and
// each the span of its handler's context. It waits until as many process
// spans as seen deliveries have ended.
func checkOneTrace(t *testing.T, spans *tracetest.SpanRecorder, queue string, seen []tracecheck.Delivery, attempts []int, outcomes []string) {
	t.Helper()
	var pubs, procs []sdktrace.ReadOnlySpan
	brokertest.Eventually(t, fmt.Sprintf("%d %s process spans have ended", len(seen), queue), func() bool {
		pubs, procs = nil, nil
		for _, s := range spans.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindProducer:
				pubs = append(pubs, s)
			case s.Name() == queue+" process":
				procs = append(procs, s)
			}
		}
		return len(procs) >= len(seen)
	})
	if len(pubs) != 1 {
		t.Fatalf("publish spans: %s; want the one application publish (library hops start none)", names(pubs))
	}
	traceID := pubs[0].SpanContext().TraceID()
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, not the publish's %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	if len(procs) != len(attempts) || len(seen) != len(attempts) {
		t.Fatalf("%d process spans and %d handler calls, want %d", len(procs), len(seen), len(attempts))
	}
	for i, s := range procs {
		a, _ := spanAttr(s, "messaging.acemq.attempt")
		o, _ := spanAttr(s, "messaging.acemq.outcome")
		if int(a.AsInt64()) != attempts[i] || o.AsString() != outcomes[i] || seen[i].Attempt != attempts[i] {
			t.Errorf("process span %d: attempt %d, outcome %q (the handler saw attempt %d); want attempt %d, %s", i+1, a.AsInt64(), o.AsString(), seen[i].Attempt, attempts[i], outcomes[i])
		}
		p := s.Parent()
		if want := "00-" + p.TraceID().String() + "-" + p.SpanID().String() + "-01"; !p.IsRemote() || seen[i].Traceparent != want {
			t.Errorf("process span %d: parent %s (remote %v), but its delivery's traceparent is %q: the parent must come from the headers", i+1, want, p.IsRemote(), seen[i].Traceparent)
		}
		if seen[i].Span.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("handler %d ran in span %s, not its process span %s", i+1, seen[i].Span.SpanID(), s.SpanContext().SpanID())
		}
	}
}

// retryToDLQ starts a consumer on q that retries every delivery through
// two broker rungs (1 s, 2 s: rungs are whole seconds) until it is exhausted and
// dead-lettered, and accepts it once it has been replayed. It publishes
// one message and returns once it is in q.dlq.
func retryToDLQ(t *testing.T, r *rig, q string, log *tracecheck.Log) {
	t.Helper()
	policy := acemq.Exponential(3, time.Second, 0).WaitInBrokerFrom(time.Second)
	if r.rabbit {
		t.Cleanup(func() {
			var rungs []string
			for _, d := range policy.BrokerDelays() {
				rungs = append(rungs, acemq.RetryQueue(q, d))
			}
			deleteQueues(t, rungs...)
		})
	}
	consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		log.Add(ctx, m.Envelope)
		if acemq.ReplayCount(m.Envelope) > 0 {
			return acemq.Accept()
		}
		return acemq.Retry(errors.New("not yet"))
	}, acemq.ConsumerConfig{Retry: policy})
	r.send(q, order{ID: "traced"})
	for i, want := range []acemq.Outcome{acemq.ConsumeRetried, acemq.ConsumeRetried, acemq.ConsumeDeadLettered} {
		s := r.nextSettlement()
		if s.Outcome != want || (want == acemq.ConsumeRetried && (!s.InBroker || !strings.HasPrefix(s.Target, q+".retry."))) {
			t.Fatalf("settlement %d: %+v, want %s (retries through a rung)", i+1, s, want)
		}
	}
	// The settlement is reported before the copy is made.
	r.waitReady(acemq.DeadLetterQueue(q), 1)
}

// Publish → consume → Retry through the rungs → exhausted → .dlq → replay
// (replay.Queue, which `acemq dlq replay` calls) → consumed again: one
// trace, the publish's, with every process span's parent taken from the
// headers and the attempt on each (README, observability; contract §5.4).
func TestOneTraceThroughRetryRungsTheDeadLetterQueueAndReplay(t *testing.T) {
	for _, rabbit := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "rabbitmq"}[rabbit], func(t *testing.T) {
			r, spans := tracedRig(t, rabbit)
			q := r.named("traced")
			r.queue(q)
			var log tracecheck.Log
			retryToDLQ(t, r, q, &log)
			rep, err := replay.Queue(context.Background(), r.c, acemq.DeadLetterQueue(q))
			if err != nil || rep.Moved != 1 {
				t.Fatalf("replay: %+v, %v; want one message moved", rep, err)
			}
			if s := r.nextSettlement(); s.Outcome != acemq.ConsumeAcked {
				t.Fatalf("after the replay: %+v, want acked", s)
			}
			checkOneTrace(t, spans, q, log.All(), []int{1, 2, 3, 1}, []string{"retried", "retried", "dead_lettered", "acked"})
		})
	}
}
