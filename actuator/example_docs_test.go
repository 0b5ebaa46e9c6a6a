package actuator_test

import (
	"context"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
)

// The wiring docs/observability.md shows: metrics into the Conn, the
// three pages served on the default address until ctx ends. It listens on
// a port, so it is compiled, not run; ExampleHandler runs the same calls.
func ExampleListenAndServe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := "memory://example-listen"

	m, _ := actuator.NewMetrics() // an SDK MeterProvider + Prometheus registry
	c, _ := acemq.Connect(ctx, url, acemq.Config{MeterProvider: m.MeterProvider()})
	h, _ := actuator.Handler(c, actuator.WithMetrics(m)) // /acemq-metrics, /acemq-health, /acemq-info
	go actuator.ListenAndServe(ctx, "", h)               // 127.0.0.1:9464

	defer c.Close(ctx)
}
