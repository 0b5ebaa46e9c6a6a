package memory

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// BenchmarkPublishConsume1KiB measures end-to-end throughput: one goroutine
// publishing 1 KiB messages with confirms (answered through callbacks) and
// one consumer with a large prefetch acking each delivery.
func BenchmarkPublishConsume1KiB(b *testing.B) {
	name := "bench-" + b.Name()
	defer Delete(name)
	ctx := context.Background()
	c, _, err := Driver{}.Dial(ctx, transport.Config{URL: "memory://" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel(ctx)
	if err != nil {
		b.Fatal(err)
	}
	q := "bench"
	if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: q, Durable: true}); err != nil {
		b.Fatal(err)
	}
	if err := ch.Qos(1000); err != nil {
		b.Fatal(err)
	}
	ds, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: q})
	if err != nil {
		b.Fatal(err)
	}
	p, err := c.Publisher(ctx, true)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()

	body := make([]byte, 1024)
	var confirmed atomic.Int64
	done := func(transport.Confirmation) { confirmed.Add(1) }
	consumed := make(chan struct{})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer close(consumed)
		for i := 0; i < b.N; i++ {
			d := <-ds
			if err := ch.Ack(d.DeliveryTag); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	msg := &transport.Message{RoutingKey: q, Body: body}
	for i := 0; i < b.N; i++ {
		if err := p.Publish(ctx, msg, done); err != nil {
			b.Fatal(err)
		}
	}
	<-consumed
	for confirmed.Load() < int64(b.N) {
		time.Sleep(time.Millisecond) // the confirmer offers no completion event
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
}
