package acemq_test

import (
	"context"
	"log/slog"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// benchPublish measures confirmed publishes on memory:// with the given
// options (instrumentation default = OpenTelemetry globals, no-op), one at
// a time: each Send waits for its confirm, so the figure is a publish's
// latency (two goroutine hand-offs inside the process), not a share of a
// pipeline as in BenchmarkSend. The queue keeps the last 1000 messages, as
// BenchmarkSend's does: a queue that kept every message made the heap grow
// with b.N, and the figures measured the fresh memory and the garbage
// collector's marking of it more than the publish.
func benchPublish(b *testing.B, name string, opts ...acemq.Config) {
	ctx := context.Background()
	cfg := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...)
	c, err := acemq.Connect(ctx, "memory://"+name, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": int64(1000)}})); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[order2](c, "", "orders", acemq.PublisherConfig{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pub.Send(ctx, order2{ID: "1"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_, _ = c.PurgeQueue(ctx, "orders")
}

func BenchmarkPublishTelemetryDefault(b *testing.B) {
	benchPublish(b, "bench-default")
}

// BenchmarkPublishTelemetrySDK is the instrumented publish of issue 16's
// target (at most 5 µs over BenchmarkPublishTelemetryNoop). Its set-up is
// pinned; changing it changes the number: a MeterProvider with one
// ManualReader (never collected during the run), a TracerProvider with the
// default sampler (parent-based, always on), default span limits and a
// BatchSpanProcessor (WithBatcher, default queue and batch sizes) exporting
// to tracetest's NoopExporter; the W3C TraceContext propagator (the Conn's
// default); JSON codec, a one-field struct, one goroutine, memory://.
func BenchmarkPublishTelemetrySDK(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	benchPublish(b, "bench-sdk", acemq.Config{MeterProvider: mp, TracerProvider: tp})
}

func BenchmarkPublishTelemetryNoop(b *testing.B) {
	benchPublish(b, "bench-noop", acemq.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()})
}
