package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// TestAPlainConsumerOfADeclaredStreamClosesWithoutKillingTheConnection:
// a drain hands back the deliveries no worker started; on a stream
// RabbitMQ answers that nack by closing the connection (540), taking every
// publisher and consumer of the Conn with it. A consumer of a queue the
// Conn declared as a stream now hands them back as acks, as
// ConsumerConfig.OnStream does, without being asked.
func TestAPlainConsumerOfADeclaredStreamClosesWithoutKillingTheConnection(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		var lost atomic.Int32
		c := brokertest.Connect(t, url, acemq.Config{OnEvent: func(e acemq.Event) {
			if e.Kind == acemq.EventLost {
				lost.Add(1)
			}
		}})
		ctx := context.Background()
		s := testenv.Unique("stream.plain")
		if err := c.Apply(ctx, acemq.NewTopology().Queue(s, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, q := range []string{s, acemq.DeadLetterQueue(s), acemq.ParkedQueue(s)} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		})
		for i := range 5 {
			if _, err := acemq.NewPublisher[int](c, "", s, acemq.PublisherConfig{}).Send(ctx, i); err != nil {
				t.Fatal(err)
			}
		}
		started := make(chan struct{}, 5)
		k, err := acemq.Consume(ctx, c, s, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
			started <- struct{}{}
			<-ctx.Done() // held until the drain's deadline cancels it
			return acemq.Accept()
		}, acemq.ConsumerConfig{Concurrency: 1, Prefetch: 10, Args: transport.Table{"x-stream-offset": "first"}, DrainTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("the consumer got nothing from the stream")
		}
		brokertest.Eventually(t, "the other four are prefetched", func() bool { return k.InFlight() >= 5 })
		_ = k.Close(ctx)
		// The connection is still the one it was: a publish goes through
		// and no loss was reported.
		if _, err := acemq.NewPublisher[int](c, "", s, acemq.PublisherConfig{}).Send(ctx, 99); err != nil {
			t.Fatalf("a publish after closing the consumer: %v", err)
		}
		if n := lost.Load(); n != 0 {
			t.Fatalf("closing a plain consumer of a stream lost the connection %d time(s)", n)
		}
	})
}
