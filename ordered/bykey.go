package ordered

import (
	"fmt"

	"github.com/acemq-go/acemq"
)

// ByHeader and ByCorrelation are key functions for the in-process
// per-key order of behaviour §7.10, for one ordinary consumer: give one
// as acemq.ConsumerConfig.KeyOrder with a Concurrency of N, and
// deliveries that share a key are handled one at a time in the order they
// arrived, while deliveries with other keys run in parallel on the N
// workers. No partition queues are needed; the order holds within this
// one consumer (see acemq.ConsumerConfig.KeyOrder for its limits: a key
// shares its worker with the other keys hashed to it, and a message
// retried through the broker comes back behind newer ones). A key of ""
// is unordered; a panic in a key function is logged and the delivery
// runs unordered.

// ByHeader orders by the application header name (its value as text);
// a delivery without it is unordered.
func ByHeader(name string) func(in acemq.Inbound) string {
	return func(in acemq.Inbound) string {
		v, ok := in.Envelope.Header(name)
		if !ok || v == nil {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		return fmt.Sprint(v)
	}
}

// ByCorrelation orders by the envelope's correlation id: the messages of
// one conversation run one at a time, in order.
func ByCorrelation() func(in acemq.Inbound) string {
	return func(in acemq.Inbound) string { return in.Envelope.CorrelationID }
}
