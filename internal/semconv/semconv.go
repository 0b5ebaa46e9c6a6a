// Package semconv holds the span attribute keys and the status rule of the
// wire contract (§5.4) for the root package and the pattern packages (rpc,
// outbox), so a key is spelled once.
package semconv

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// System is the value of messaging.system on every span.
const System = "rabbitmq"

// Span attribute keys (contract §5.4).
const (
	MessagingSystem = attribute.Key("messaging.system")
	Destination     = attribute.Key("messaging.destination.name")
	Operation       = attribute.Key("messaging.operation")
	MessageID       = attribute.Key("messaging.message.id")
	Conversation    = attribute.Key("messaging.message.conversation_id")
	RoutingKey      = attribute.Key("messaging.rabbitmq.destination.routing_key")
	MessageType     = attribute.Key("messaging.acemq.message_type")
	Attempt         = attribute.Key("messaging.acemq.attempt")
	RetryDelayMs    = attribute.Key("messaging.acemq.retry_delay_ms")
	Outcome         = attribute.Key("messaging.acemq.outcome")
	Reason          = attribute.Key("messaging.acemq.reason")
	OutboxLagMs     = attribute.Key("messaging.acemq.outbox_lag_ms")
)

// Span-kind start options, made once: building one per span allocates.
var (
	Producer = trace.WithSpanKind(trace.SpanKindProducer)
	Consumer = trace.WithSpanKind(trace.SpanKindConsumer)
	Client   = trace.WithSpanKind(trace.SpanKindClient)
)

// DestinationOf returns the span's destination: the exchange, or the
// routing key on the default exchange ("").
func DestinationOf(exchange, routingKey string) string {
	if exchange == "" {
		return routingKey
	}
	return exchange
}

// IsError reports whether a span ending with outcome has status ERROR:
// unroutable, failed, refused, dead_lettered and timed_out do; every other
// word (confirmed, published, acked, answered, …) does not.
func IsError(outcome string) bool {
	switch outcome {
	case "unroutable", "failed", "refused", "dead_lettered", "timed_out":
		return true
	}
	return false
}

// HeaderCarrier reads trace context (traceparent, tracestate) from message
// headers as a propagation.TextMapCarrier: text values as strings or bytes,
// anything else as absent. It never writes.
type HeaderCarrier map[string]any

// Get returns the header's text, or "" when it is absent or not text.
func (c HeaderCarrier) Get(key string) string {
	switch v := c[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// Set does nothing: the headers are read only.
func (c HeaderCarrier) Set(string, string) {}

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
