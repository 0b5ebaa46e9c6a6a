package replay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

// A consumer rejects two orders because of a bug; after the fix, Queue
// moves them from orders.dlq back to orders.
func ExampleQueue() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-replay", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic}).DeadLetters("orders")); err != nil {
		panic(err)
	}
	pub := acemq.NewPublisher[string](c, "", "orders", acemq.PublisherConfig{})
	var wg sync.WaitGroup
	wg.Add(2)
	k, err := acemq.Consume(ctx, c, "orders", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		defer wg.Done()
		return acemq.Reject(errors.New("the bug"))
	}, acemq.ConsumerConfig{})
	if err != nil {
		panic(err)
	}
	if _, err := pub.SendAll(ctx, []string{"o-1", "o-2"}); err != nil {
		panic(err)
	}
	wg.Wait()
	if err := k.Close(ctx); err != nil {
		panic(err)
	}

	report, err := replay.Queue(ctx, c, "orders.dlq")
	if err != nil {
		panic(err)
	}
	fmt.Println(report)
	info, err := c.QueueInfo(ctx, "orders")
	if err != nil {
		panic(err)
	}
	fmt.Println("back on orders:", info.Messages)
	// Output:
	// moved 2, skipped 0 (drained)
	// back on orders: 2
}

// Before reading a queue, Inspect says what a read would do there. On
// RabbitMQ give the management API (ManagementAPI) so it can see the
// queue's type, arguments and policies; the in-process broker needs none.
// Browse itself refuses, with an *UnsafeReadError, where a read would move
// a message toward a delivery limit.
func ExampleInspect() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-inspect", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic}).DeadLetters("orders")); err != nil {
		panic(err)
	}
	a, err := replay.Inspect(ctx, c, "orders.dlq", replay.ManagementAPI("http://guest:guest@localhost:15672/", "/"))
	if err != nil {
		panic(err)
	}
	fmt.Println("safe:", a.Safe)
	_, err = replay.Browse(ctx, c, "orders.dlq", 10, func(m *acemq.Pulled) bool { return true })
	var unsafe *replay.UnsafeReadError
	fmt.Println("refused:", errors.As(err, &unsafe))
	// Output:
	// safe: true
	// refused: false
}
