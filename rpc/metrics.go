package rpc

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Request outcome words (contract §5.2).
const (
	OutcomeAnswered = "answered"
	OutcomeTimedOut = "timed_out"
	OutcomeFailed   = "failed"
)

const meterScope = "org.acemq.amqp"

type metrics struct {
	total     metric.Int64Counter
	duration  metric.Float64Histogram
	transport string
}

func newMetrics(mp metric.MeterProvider, transport string) (*metrics, error) {
	m := mp.Meter(meterScope)
	total, err := m.Int64Counter("acemq.request.total",
		metric.WithDescription("Requests made, by outcome: answered, timed_out or failed."))
	if err != nil {
		return nil, err
	}
	dur, err := m.Float64Histogram("acemq.request.duration", metric.WithUnit("s"),
		metric.WithDescription("The caller's round trip, from before the request is published until Request returns."))
	if err != nil {
		return nil, err
	}
	return &metrics{total: total, duration: dur, transport: transport}, nil
}

func (m *metrics) record(ctx context.Context, routingKey, messageType, outcome string, d time.Duration) {
	ctx = context.WithoutCancel(ctx)
	attrs := metric.WithAttributes(
		attribute.String("routing.key", routingKey),
		attribute.String("message.type", messageType),
		attribute.String("transport", m.transport),
		attribute.String("outcome", outcome),
	)
	m.total.Add(ctx, 1, attrs)
	m.duration.Record(ctx, d.Seconds(), attrs)
}
