package schedule

import (
	"github.com/acemq-go/acemq"
	"go.opentelemetry.io/otel/metric"
)

// instruments are the scheduler's counters: acemq.schedule.scheduled,
// .delivered and .hops (unit {message}), on the Conn's meter provider.
type instruments struct {
	scheduled, delivered, hops metric.Int64Counter
}

func meters(c *acemq.Conn) instruments {
	m := c.Config().MeterProvider.Meter(acemq.InstrumentationScope)
	// The API returns a working no-op instrument alongside any error, so
	// an instrument that cannot be made never stops a schedule.
	scheduled, _ := m.Int64Counter("acemq.schedule.scheduled", metric.WithUnit("{message}"), metric.WithDescription("Messages handed to the scheduler."))
	delivered, _ := m.Int64Counter("acemq.schedule.delivered", metric.WithUnit("{message}"), metric.WithDescription("Scheduled messages delivered to their target."))
	hops, _ := m.Int64Counter("acemq.schedule.hops", metric.WithUnit("{message}"), metric.WithDescription("Scheduled messages sent to a waiting rung."))
	return instruments{scheduled: scheduled, delivered: delivered, hops: hops}
}
