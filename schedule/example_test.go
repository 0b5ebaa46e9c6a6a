package schedule_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/schedule"
)

// A reminder is scheduled two seconds ahead; the scheduler holds it on
// the 1s rung and delivers it when it is due.
func ExampleAfter() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-schedule", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	s, err := schedule.Start(ctx, c) // declares the ladder, runs the control consumer
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("reminders", acemq.QueueOptions{})); err != nil {
		panic(err)
	}
	got := make(chan string, 1)
	if _, err := acemq.Consume(ctx, c, "reminders", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		got <- m.Envelope.Type + ": " + m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{}); err != nil {
		panic(err)
	}
	start := time.Now()
	if err := schedule.After(ctx, c, "", "reminders", "call the customer", 2*time.Second); err != nil {
		panic(err)
	}
	fmt.Println(<-got, time.Since(start) >= time.Second)
	// Output: ScheduledMessage: call the customer true
}
