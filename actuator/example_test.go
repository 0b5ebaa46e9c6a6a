package actuator_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
)

// The actuator's Metrics is the MeterProvider the Conn reports to; the
// handler serves it with the Conn's health and info.
func ExampleHandler() {
	ctx := context.Background()
	m, err := actuator.NewMetrics()
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(ctx)
	conn, err := acemq.Connect(ctx, "memory://example-actuator", acemq.Config{Logger: slog.New(slog.DiscardHandler), MeterProvider: m.MeterProvider()})
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	h, err := actuator.Handler(conn, actuator.WithMetrics(m))
	if err != nil {
		panic(err)
	}
	// In a service: go actuator.ListenAndServe(ctx, actuator.DefaultAddr, h)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acemq-health", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 {"status":"UP","components":{"acemq":{"status":"UP","details":{"transport":"memory","open":true,"blocked":false,"inFlight":0}}}}
}
