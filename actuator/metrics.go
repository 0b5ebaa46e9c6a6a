package actuator

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Content types served (contract §6).
const (
	ContentTypeMetrics = "text/plain; version=0.0.4; charset=utf-8"
	ContentTypeJSON    = "application/json; charset=utf-8"
	ContentTypeText    = "text/plain; charset=utf-8"
)

// Metrics is an OpenTelemetry SDK MeterProvider whose readings are served
// as Prometheus text. Pass MeterProvider() to acemq.Config.MeterProvider (and
// to anything else that should appear on the scrape), and the Metrics to
// the actuator with WithMetrics:
//
//	m, _ := actuator.NewMetrics()
//	conn, _ := acemq.Connect(ctx, url, acemq.Config{MeterProvider: m.MeterProvider()})
//	h, _ := actuator.Handler(conn, actuator.WithMetrics(m))
//
// A Metrics is safe for concurrent use.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
}

// NewMetrics creates a MeterProvider with a Prometheus exporter on a
// private registry. Names follow contract §5.3: dots become underscores in
// metric and label names, counters end in one _total, durations in
// _seconds.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("acemq: the Prometheus exporter could not be created: %w", err)
	}
	return &Metrics{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), registry: reg}, nil
}

// MeterProvider is the provider to pass to acemq.Config.MeterProvider.
func (m *Metrics) MeterProvider() metric.MeterProvider { return m.provider }

// Registry is the Prometheus registry behind the scrape; register extra
// collectors on it to serve them on the same path.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Shutdown stops the MeterProvider; later scrapes are empty.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// render writes the Prometheus text exposition of every family.
func (m *Metrics) render() ([]byte, error) {
	var buf bytes.Buffer
	if m == nil {
		return nil, nil
	}
	fams, err := m.registry.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func (a *actuator) serveMetrics(w http.ResponseWriter, r *http.Request) {
	body, err := a.metrics.render()
	if err != nil {
		a.fail(w, r)
		return
	}
	write(w, r, http.StatusOK, ContentTypeMetrics, body)
}
