package acemq

import (
	"context"

	"github.com/acemq-go/acemq/transport"
)

// telemetry is where the engine reports to metrics and traces. The engine
// calls it at fixed points; this file decides what is recorded.
//
// Call points:
//   - publishStart: once per application publish, after interceptors and
//     before the envelope is rendered (it may add traceparent/tracestate to
//     *env); the returned end is called exactly once with the outcome word.
//   - processStart: once per delivery, before interceptors; the handler runs
//     with the returned context; end is called exactly once with the
//     settlement (not called when the delivery's channel died first).
//   - fallback: a set-aside failure or a missing rung.
//   - inFlight: the consumer in-flight gauge moves by delta.
type telemetry struct {
	transport string
}

func newTelemetry(cfg *config, transportName string) *telemetry {
	return &telemetry{transport: transportName}
}

type publishEnd func(outcome string, err error)

type processEnd func(s Settlement)

func noopPublishEnd(string, error) {}
func noopProcessEnd(Settlement)    {}

func (t *telemetry) publishStart(ctx context.Context, exchange, routingKey string, env *Envelope) (context.Context, publishEnd) {
	return ctx, noopPublishEnd
}

func (t *telemetry) processStart(ctx context.Context, queue string, env Envelope, d *transport.Delivery) (context.Context, processEnd) {
	return ctx, noopProcessEnd
}

func (t *telemetry) fallback(f Fallback) {}

func (t *telemetry) inFlight(queue string, delta int64) {}

// telemetryConfig holds the telemetry options (meter and tracer providers).
type telemetryConfig struct{}
