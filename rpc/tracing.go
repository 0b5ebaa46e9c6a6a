package rpc

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/semconv"
)

// requestSpan is one call's "{destination} request" span (contract §5.4):
// CLIENT, started before the request is published and ended when Request
// returns. The request's publish span is its child (the publish runs with
// its context), so the traceparent the request carries is in its trace.
type requestSpan struct{ span trace.Span }

func startRequestSpan(ctx context.Context, t trace.Tracer, exchange, routingKey string) (context.Context, requestSpan) {
	dest := semconv.DestinationOf(exchange, routingKey)
	ctx, span := t.Start(ctx, dest+" request", semconv.Client)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystem.String(semconv.System),
			semconv.Destination.String(dest),
			semconv.Operation.String("request"),
		)
	}
	return ctx, requestSpan{span}
}

// conversation records the request's correlation, known before it is
// published.
func (s requestSpan) conversation(corr string) {
	if s.span.IsRecording() {
		s.span.SetAttributes(semconv.Conversation.String(corr))
	}
}

// end records the outcome (the word acemq.request.total counts), the
// request's id and type, sets status ERROR for failed and timed_out, and
// ends the span. id may be empty when the request was never built.
func (s requestSpan) end(outcome, id, msgType string, err error) {
	if s.span.IsRecording() {
		if id == "" {
			var pe *acemq.PublishError
			if errors.As(err, &pe) {
				id = pe.MessageID
			}
		}
		if id != "" {
			s.span.SetAttributes(semconv.MessageID.String(id))
		}
		s.span.SetAttributes(semconv.MessageType.String(msgType), semconv.Outcome.String(outcome))
		if semconv.IsError(outcome) {
			desc := outcome
			if err != nil {
				desc = err.Error()
				s.span.RecordError(err)
			}
			s.span.SetStatus(codes.Error, desc)
		}
	}
	s.span.End()
}
