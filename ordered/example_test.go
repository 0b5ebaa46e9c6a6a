package ordered_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/ordered"
)

// Events of one order are handled in the order they were sent, while other
// orders' events run in parallel on other partitions.
func ExampleConsume() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-ordered", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	top, err := ordered.Topology("orders", 4)
	if err != nil {
		panic(err)
	}
	if err := c.Apply(ctx, top); err != nil {
		panic(err)
	}
	for _, ev := range []string{"created", "paid", "shipped"} {
		if _, err := ordered.Send(ctx, c, "orders", 4, "o-1", ev, acemq.SendOptions{}); err != nil {
			panic(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(3)
	k, err := ordered.Consume(ctx, c, "orders", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		fmt.Println(m.Envelope.Headers()[ordered.HeaderKey], m.Payload)
		wg.Done()
		return acemq.Accept()
	}, ordered.Partitions(4), ordered.OnFailure(ordered.RetryInPlace))
	if err != nil {
		panic(err)
	}
	wg.Wait()
	if err := k.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// o-1 created
	// o-1 paid
	// o-1 shipped
}
