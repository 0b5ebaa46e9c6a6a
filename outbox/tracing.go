package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/semconv"
)

// Relay outcome words: acemq.outbox.total counts published and failed
// (contract §5.2); refused marks a span whose publish was declined before
// anything was written, which the counter does not count.
const (
	outcomePublished = "published"
	outcomeFailed    = "failed"
	outcomeRefused   = string(acemq.OutcomeRefused)
)

// eventPublishFailed is the span event of a relay publish that failed
// (contract §5.4).
const eventPublishFailed = "outbox.publish_failed"

// publishSpan is the relay's "{destination} publish" span for one record
// (PRODUCER, contract §5.4). Its parent is the trace context stored in the
// record's headers when there is one, else ctx's span. The record's bytes
// are final, so the span's own context is not written into the message:
// its consumers continue the stored trace, as siblings of this span.
type publishSpan struct{ span trace.Span }

func (r *Relay) startSpan(ctx context.Context, rec Record) publishSpan {
	pctx := r.conn.Config().Propagator.Extract(ctx, semconv.HeaderCarrier(rec.Headers))
	dest := semconv.DestinationOf(rec.Exchange, rec.RoutingKey)
	_, span := r.tracer.Start(pctx, dest+" publish", semconv.Producer)
	if span.IsRecording() {
		env := acemq.ReadEnvelope(rec.Headers, rec.RoutingKey, rec.ID, "")
		span.SetAttributes(
			semconv.MessagingSystem.String(semconv.System),
			semconv.Destination.String(dest),
			semconv.Operation.String("publish"),
			semconv.MessageID.String(rec.ID),
			semconv.RoutingKey.String(rec.RoutingKey),
			semconv.MessageType.String(env.Type),
		)
		if env.CorrelationID != "" {
			span.SetAttributes(semconv.Conversation.String(env.CorrelationID))
		}
	}
	return publishSpan{span}
}

// published ends the span of a confirmed record with its lag (Store.Add to
// confirm) in messaging.acemq.outbox_lag_ms.
func (s publishSpan) published(lag time.Duration) {
	if s.span.IsRecording() {
		s.span.SetAttributes(semconv.Outcome.String(outcomePublished), semconv.OutboxLagMs.Int64(lag.Milliseconds()))
	}
	s.span.End()
}

// failed ends the span of a publish that did not end confirmed. outcome is
// failed (counted; the span gets the outbox.publish_failed event with the
// error as messaging.acemq.reason) or refused (not counted, no event). An
// unroutable publish also carries the broker's reply text as
// messaging.acemq.reason on the span. Both are ERROR.
func (s publishSpan) failed(outcome string, err error) {
	if s.span.IsRecording() {
		s.span.SetAttributes(semconv.Outcome.String(outcome))
		var pe *acemq.PublishError
		if acemq.IsUnroutable(err) && errors.As(err, &pe) {
			s.span.SetAttributes(semconv.Reason.String(pe.Reason))
		}
		if outcome == outcomeFailed {
			s.span.AddEvent(eventPublishFailed, trace.WithAttributes(semconv.Reason.String(describe(err))))
		}
		s.span.SetStatus(codes.Error, fmt.Sprint(err))
	}
	s.span.End()
}

// withTraceOf stores the trace of the work that writes a record (ctx's
// span) in its headers, with the Conn's propagator, so the relay's publish
// span and the consumer continue that trace. A traceparent the caller set
// with WithHeader wins; without a span in ctx nothing is added.
func withTraceOf(ctx context.Context, conn *acemq.Conn, env acemq.Envelope) acemq.Envelope {
	if _, set := env.Header("traceparent"); set || !trace.SpanContextFromContext(ctx).IsValid() {
		return env
	}
	carrier := propagation.MapCarrier{}
	conn.Config().Propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return env
	}
	h := make(map[string]any, len(carrier))
	for k, v := range carrier {
		h[k] = v
	}
	return env.WithHeaders(h)
}
