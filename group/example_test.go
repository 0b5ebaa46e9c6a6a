package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/group"
)

// Four competing consumers share one queue; Close drains them together.
func ExampleConsume() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-group", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.new", acemq.QueueOptions{})); err != nil {
		panic(err)
	}
	var handled atomic.Int32
	g, err := group.Consume(ctx, c, "orders.new", 4, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		handled.Add(1)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		panic(err)
	}
	for i := range 10 {
		if _, err := c.Publish(ctx, "", "orders.new", fmt.Sprint("order ", i), acemq.SendOptions{}); err != nil {
			panic(err)
		}
	}
	for handled.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(g.Size(), "members,", g.Members()[0].Tag())
	fmt.Println(g.Close(ctx), handled.Load())
	// Output:
	// 4 members, acemq-orders.new-1
	// <nil> 10
}
