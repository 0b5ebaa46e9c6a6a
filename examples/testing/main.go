// Command testing is the journey of a service's tests: a small order
// service (service.go) whose handler asks a payments service to charge
// each order, retries while payments fails (six attempts over five
// minutes), rejects a declined card and schedules a reminder an hour
// later. main_test.go tests every one of those paths with package
// acemqtest, in virtual time: the five minutes of retries and the hour's
// reminder take milliseconds.
//
//	go test ./examples/testing
//
// The program itself runs the service on the in-process broker with a
// payments service that approves, sends one order and exits 0 once it
// was charged:
//
//	go run ./examples/testing
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/schedule"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := make(chan acemq.Settlement, 16)
	c, err := acemq.Connect(ctx, "memory://example-testing", acemq.Config{
		Logger:       slog.New(slog.DiscardHandler),
		OnSettlement: func(s acemq.Settlement) { settled <- s },
	})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if err := c.Apply(ctx, Topology()); err != nil {
		return err
	}
	if err := c.Apply(ctx, schedule.Topology()); err != nil {
		return err
	}
	sched, err := schedule.Start(ctx, c)
	if err != nil {
		return err
	}
	defer sched.Close(context.Background())
	// The payments service, here in the same process: it approves.
	if err := c.Apply(ctx, acemq.NewTopology().
		Exchange("payments", acemq.Direct, acemq.ExchangeOptions{}).
		Queue("payments.charge", acemq.QueueOptions{}).DeadLetters("payments.charge").
		Bind("payments.charge", "payments", "charge")); err != nil {
		return err
	}
	if _, err := rpc.Respond(ctx, c, "payments.charge", func(ctx context.Context, m *acemq.Message[Order]) (Charge, error) {
		return Charge{Approved: true}, nil
	}, acemq.ConsumerConfig{}); err != nil {
		return err
	}
	if _, err := Start(ctx, c); err != nil {
		return err
	}
	if _, err := acemq.NewPublisher[Order](c, "orders", "order.placed", acemq.PublisherConfig{}).Send(ctx, Order{ID: "o-1", Card: "4111", Cents: 1250}); err != nil {
		return err
	}
	for {
		select {
		case s := <-settled:
			if s.Queue == "orders.new" {
				if s.Outcome != acemq.ConsumeAcked {
					return fmt.Errorf("the order was %s (%s), want acked", s.Outcome, s.Reason)
				}
				fmt.Printf("order %s charged; its reminder is due in %s\nOK\n", "o-1", ReminderDelay)
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the order was not charged in time: %w", ctx.Err())
		}
	}
}
