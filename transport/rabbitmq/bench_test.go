package rabbitmq

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// BenchmarkPublishConfirmedPipelined publishes 256-byte persistent messages
// on one confirm-mode channel with up to 1000 unanswered at a time.
func BenchmarkPublishConfirmedPipelined(b *testing.B) {
	c := dial(b, transport.Config{})
	q := tempQueue(b, c, "rabbit.bench", nil)
	p := openPublisher(b, c)
	window := make(chan struct{}, 1000)
	answered := make(chan struct{}, 1)
	var left = int64(b.N)
	var failures int64
	done := func(cf transport.Confirmation) {
		if cf.Outcome != transport.Acked {
			failures++
		}
		<-window
		left--
		if left == 0 {
			answered <- struct{}{}
		}
	}
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256), Properties: transport.Properties{DeliveryMode: 2}}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		window <- struct{}{}
		if err := p.Publish(context.Background(), msg, done); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-answered:
	case <-time.After(time.Minute):
		b.Fatal("confirms did not all arrive")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
	if failures != 0 {
		b.Fatalf("%d publishes not acked", failures)
	}
}
