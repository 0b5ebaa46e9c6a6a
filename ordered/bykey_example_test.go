package ordered_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/ordered"
)

// One consumer with eight workers: the events of each order run one at a
// time and in the order they were sent, different orders in parallel.
func ExampleByHeader() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-bykey", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("events", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		panic(err)
	}
	pub := acemq.NewPublisher[string](c, "", "events", acemq.PublisherConfig{})
	for _, ev := range []string{"created", "paid", "shipped"} {
		if _, err := pub.SendWith(ctx, ev, acemq.SendOptions{Headers: map[string]any{"order": "o-1"}}); err != nil {
			panic(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(3)
	k, err := acemq.Consume(ctx, c, "events", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		fmt.Println(m.Payload) // one at a time for o-1: no lock needed
		wg.Done()
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 8, KeyOrder: ordered.ByHeader("order")})
	if err != nil {
		panic(err)
	}
	wg.Wait()
	if err := k.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// created
	// paid
	// shipped
}
