package slip_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/slip"
)

// An order goes through validate and charge, then lands in orders.done.
// Each step is a consumer wrapped in slip.Follow: it handles the message,
// and the wrapper sends it on to the next step before accepting it.
func ExampleFollow() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-slip", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("validate", acemq.QueueOptions{}).Queue("charge", acemq.QueueOptions{}).Queue("orders.done", acemq.QueueOptions{})); err != nil {
		panic(err)
	}
	done := make(chan string, 1)
	for _, step := range []string{"validate", "charge"} {
		_, err := acemq.Consume(ctx, c, step, slip.Follow(c, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
			fmt.Println(step, m.Payload)
			return acemq.Accept()
		}), acemq.ConsumerConfig{})
		if err != nil {
			panic(err)
		}
	}
	_, err = acemq.Consume(ctx, c, "orders.done", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		_, s, _ := slip.Of(m.Envelope)
		done <- fmt.Sprintf("done after %d steps", len(s.Done))
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		panic(err)
	}
	s, _ := slip.New(slip.To("", "validate", "validate"), slip.To("", "charge", "charge"), slip.To("", "orders.done", "archive"))
	if _, err := slip.Start(ctx, c, s, "order o-1", acemq.SendOptions{}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output:
	// validate order o-1
	// charge order o-1
	// done after 2 steps
}
