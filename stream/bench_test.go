package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// benchStream fills a fresh stream on the test RabbitMQ node with n
// 256-byte envelopes (in confirmed batches of 1000) and returns its name.
func benchStream(b *testing.B, c *acemq.Conn, n int) string {
	b.Helper()
	ctx := context.Background()
	s := testenv.Unique("bench-stream")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(s, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, q := range []string{s, acemq.DeadLetterQueue(s), acemq.ParkedQueue(s)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	})
	body, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 240)})
	for done := 0; done < n; {
		batch := make([]acemq.RawMessage, 0, 1000)
		for i := 0; i < 1000 && done+i < n; i++ {
			env := acemq.NewEnvelope()
			env.Type = "bench"
			batch = append(batch, acemq.RawMessage{RoutingKey: s, ContentType: "application/json", MessageID: env.ID,
				Headers: env.WireHeaders(), Body: body})
		}
		for _, err := range c.PublishRawBatch(ctx, batch) {
			if err != nil {
				b.Fatal(err)
			}
		}
		done += len(batch)
	}
	return s
}

// BenchmarkStreamReadRabbitMQ measures reading a 20 000-message stream
// from first to last on the test RabbitMQ node over AMQP 0-9-1: through
// stream.Read (decode, handler, ack per message) at several prefetches,
// and through a bare channel (ack per message, nothing decoded) as the
// protocol's ceiling here. Reported as msgs/s.
//
//	go test -run '^$' -bench StreamReadRabbitMQ -benchtime 3x ./stream/
func BenchmarkStreamReadRabbitMQ(b *testing.B) {
	url := testenv.AMQPURL(b)
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	n := benchN()
	s := benchStream(b, c, n)
	for _, prefetch := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("reader/prefetch=%d", prefetch), func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				done := make(chan struct{})
				count := 0
				r, err := Read(ctx, c, s, fmt.Sprintf("bench-%d-%d", prefetch, i), func(_ context.Context, m *Message[map[string]string]) acemq.Decision {
					count++
					if count == n {
						close(done)
					}
					return acemq.Accept()
				}, From(First()), Prefetch(prefetch), LagProbe(0))
				if err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					h, _ := r.Handled()
					pk, _ := c.QueueInfo(ctx, acemq.ParkedQueue(s))
					dl, _ := c.QueueInfo(ctx, acemq.DeadLetterQueue(s))
					b.Fatalf("the reader handled %d of %d in 20 s (newest offset %d, lag %+v); parked %d, dlq %d; health %+v", count, n, h, r.Lag(), pk.Messages, dl.Messages, c.Health(ctx))
				}
				_ = r.Close(ctx)
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
	for _, prefetch := range []int{100, 1000} {
		b.Run(fmt.Sprintf("channel/prefetch=%d", prefetch), func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				ch, err := c.Channel(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := ch.Qos(prefetch); err != nil {
					b.Fatal(err)
				}
				ds, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: s, Tag: fmt.Sprint("bench-raw-", i), Args: transport.Table{"x-stream-offset": "first"}})
				if err != nil {
					b.Fatal(err)
				}
				for got := 0; got < n; got++ {
					d := <-ds
					if err := ch.Ack(d.DeliveryTag); err != nil {
						b.Fatal(err)
					}
				}
				_ = ch.Close()
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// benchN is the stream's length: $ACEMQ_STREAM_BENCH_N, else 20 000.
func benchN() int {
	if v, err := strconv.Atoi(os.Getenv("ACEMQ_STREAM_BENCH_N")); err == nil && v > 0 {
		return v
	}
	return 20_000
}
