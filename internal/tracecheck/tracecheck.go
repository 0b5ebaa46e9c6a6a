// Package tracecheck holds the trace assertions shared by the tests that
// follow one message through retries, dead letters and replay (contract
// §5.4): every span in the publish's trace, each process span's parent the
// traceparent its delivery carried, the handler running in that span.
package tracecheck

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Delivery is what a handler saw of one delivery.
type Delivery struct {
	Attempt     int
	Traceparent string
	Span        trace.SpanContext
}

// Log records deliveries from a handler; safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	seen []Delivery
}

// Add records the delivery of env handled in ctx.
func (l *Log) Add(ctx context.Context, env acemq.Envelope) {
	v, _ := env.Header("traceparent")
	p, _ := v.(string)
	l.mu.Lock()
	l.seen = append(l.seen, Delivery{env.Attempt, p, trace.SpanContextFromContext(ctx)})
	l.mu.Unlock()
}

// All returns the deliveries recorded so far, in order.
func (l *Log) All() []Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Delivery(nil), l.seen...)
}

// OneTrace waits (10 s at most) for len(attempts) process spans, those
// isProcess picks, then checks there is one publish span, every ended span
// is in its trace, and process span i carries attempt attempts[i], has the
// remote parent deliveries[i]'s traceparent names, and is the span the
// handler ran in.
func OneTrace(t *testing.T, spans *tracetest.SpanRecorder, isProcess func(sdktrace.ReadOnlySpan) bool, deliveries *Log, attempts []int64) {
	t.Helper()
	var pubs, procs []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); ; {
		pubs, procs = nil, nil
		for _, s := range spans.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindProducer:
				pubs = append(pubs, s)
			case isProcess(s):
				procs = append(procs, s)
			}
		}
		if len(procs) >= len(attempts) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d process spans ended, want %d", len(procs), len(attempts))
		}
		time.Sleep(5 * time.Millisecond) // the span ends just after the settlement is reported
	}
	if len(pubs) != 1 || len(procs) != len(attempts) {
		t.Fatalf("%d publish and %d process spans, want 1 and %d", len(pubs), len(procs), len(attempts))
	}
	traceID := pubs[0].SpanContext().TraceID()
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, not the publish's %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	calls := deliveries.All()
	if len(calls) < len(attempts) {
		t.Fatalf("the handler saw %d deliveries, want %d", len(calls), len(attempts))
	}
	for i, s := range procs {
		var attempt int64
		for _, kv := range s.Attributes() {
			if kv.Key == "messaging.acemq.attempt" {
				attempt = kv.Value.AsInt64()
			}
		}
		if want := attempts[i]; attempt != want || calls[i].Attempt != int(want) {
			t.Errorf("process span %d has attempt %d (the handler saw %d), want %d", i+1, attempt, calls[i].Attempt, want)
		}
		p := s.Parent()
		if want := "00-" + p.TraceID().String() + "-" + p.SpanID().String() + "-01"; !p.IsRemote() || calls[i].Traceparent != want {
			t.Errorf("process span %d: parent %s (remote %v), but its delivery's traceparent is %q", i+1, want, p.IsRemote(), calls[i].Traceparent)
		}
		if calls[i].Span.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("handler %d ran in span %s, not its process span %s", i+1, calls[i].Span.SpanID(), s.SpanContext().SpanID())
		}
	}
}
