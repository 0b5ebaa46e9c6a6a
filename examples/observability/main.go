// Command observability is the fifth journey: what a service shows its
// operators. The Conn is instrumented through the OpenTelemetry API with
// an SDK MeterProvider served as Prometheus text by the actuator
// (/acemq-metrics, /acemq-health) and an SDK TracerProvider (here a span
// recorder; in a service, an OTLP exporter). One order is published and
// consumed; the example scrapes the metrics over HTTP and prints the
// publish and consume counters and the trace: the consumer's span
// continues the publisher's trace through the message's traceparent
// header. It runs with nothing installed (memory://) or against RabbitMQ:
//
//	go run ./examples/observability
//	go run ./examples/observability -url amqp://guest:guest@127.0.0.1:5672/
//
// (or set ACEMQ_URL). It exits 0 only if the scrape counted the confirmed
// publish and the acked delivery, health said UP, and both spans share one
// trace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
)

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://observability"), "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	metrics, err := actuator.NewMetrics()
	if err != nil {
		return err
	}
	spans := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tracer.Shutdown(context.Background())

	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), MeterProvider: metrics.MeterProvider(), TracerProvider: tracer})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	// The actuator on a loopback port of the system's choosing.
	h, err := actuator.Handler(c, actuator.WithMetrics(metrics), actuator.WithApplication("observability-example", "1.0.0"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- actuator.Serve(serveCtx, ln, h) }()
	defer func() { stopServing(); <-served }()
	base := "http://" + ln.Addr().String()

	queue := "example.observability." + time.Now().Format("150405.000000")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{}).DeadLetters(queue)); err != nil {
		return err
	}
	defer func() {
		for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()
	done := make(chan struct{})
	cons, err := acemq.Consume(ctx, c, queue, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		close(done)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	if _, err := acemq.NewPublisher[string](c, "", queue, acemq.PublisherConfig{}).Send(ctx, "o-1"); err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("the order was not consumed")
	}
	// Closing the consumer drains it: the ack and its span have ended.
	if err := cons.Close(ctx); err != nil {
		return err
	}

	health, err := get(ctx, base+"/acemq-health")
	if err != nil {
		return err
	}
	fmt.Printf("GET /acemq-health: %s\n", strings.TrimSpace(health))
	if !strings.Contains(health, `"UP"`) {
		return errors.New("health is not UP")
	}
	scrape, err := get(ctx, base+"/acemq-metrics")
	if err != nil {
		return err
	}
	fmt.Println("GET /acemq-metrics (the counters):")
	want := map[string]bool{`outcome="confirmed"`: false, `outcome="acked"`: false}
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, "acemq_publish_total{") || strings.HasPrefix(line, "acemq_consume_total{") {
			fmt.Println("  " + line)
			for k := range want {
				if strings.Contains(line, k) && strings.HasSuffix(line, " 1") {
					want[k] = true
				}
			}
		}
	}
	for k, ok := range want {
		if !ok {
			return fmt.Errorf("the scrape has no counter at 1 with %s", k)
		}
	}

	fmt.Println("the trace:")
	traces := map[string]int{}
	for _, s := range spans.Ended() {
		fmt.Printf("  %-8s %-40s trace %s span %s parent %s\n", s.SpanKind(), s.Name(),
			s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.Parent().SpanID())
		traces[s.SpanContext().TraceID().String()]++
	}
	if len(spans.Ended()) < 2 || len(traces) != 1 {
		return fmt.Errorf("want a publish and a process span in one trace, got %d spans in %d traces", len(spans.Ended()), len(traces))
	}
	fmt.Println("OK")
	return nil
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}
