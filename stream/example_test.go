package stream_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"sync"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
	"github.com/acemq-go/acemq/transport/memory"
)

type orderPlaced struct {
	ID    string
	Total int
}

// A reader replays a stream from the first message into a read model;
// every message comes with its offset.
func ExampleRead() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-stream", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Delete("example-stream")
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.history", acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		log.Fatal(err)
	}
	for i, total := range []int{30, 12, 58} {
		if _, err := c.Publish(ctx, "", "orders.history", orderPlaced{ID: fmt.Sprint("o-", i), Total: total}, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}

	var mu sync.Mutex
	revenue, done := 0, make(chan struct{})
	r, err := stream.Read(ctx, c, "orders.history", "revenue-model",
		func(_ context.Context, m *stream.Message[orderPlaced]) acemq.Decision {
			mu.Lock()
			defer mu.Unlock()
			revenue += m.Payload.Total
			fmt.Println(m.Offset, m.Payload.ID, revenue)
			if m.Offset == 2 {
				close(done)
			}
			return acemq.Accept()
		}, stream.From(stream.First()))
	if err != nil {
		log.Fatal(err)
	}
	<-done
	if err := r.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 o-0 30
	// 1 o-1 42
	// 2 o-2 100
}
