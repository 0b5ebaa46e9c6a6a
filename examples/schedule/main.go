// Command schedule shows the scheduler: a reminder is scheduled 2 s
// ahead, waits in the broker's TTL rungs (no plugin) and is delivered to
// its queue. It runs on the in-process broker; -url runs it against
// RabbitMQ. It exits 0 only if the reminder arrived, intact, no earlier
// than the scheduler's documented precision (about 1 s early at most)
// and within 15 s.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/schedule"
)

type reminder struct {
	Text string `json:"text"`
}

func main() {
	url := flag.String("url", "memory://example-schedule", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := fmt.Sprintf("example.reminders.%d", time.Now().UnixNano())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	s, err := schedule.Start(ctx, c)
	if err != nil {
		return err
	}
	defer s.Close(context.Background())

	got := make(chan reminder, 1)
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[reminder]) acemq.Decision {
		got <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	defer k.Close(context.Background())

	const delay = 2 * time.Second
	start := time.Now()
	if err := schedule.After(ctx, c, "", q, reminder{Text: "call Ada"}, delay); err != nil {
		return err
	}
	select {
	case r := <-got:
		took := time.Since(start)
		fmt.Printf("%q delivered after %v (asked for %v)\n", r.Text, took.Round(10*time.Millisecond), delay)
		if r.Text != "call Ada" {
			return fmt.Errorf("delivered %q", r.Text)
		}
		if took < delay-1100*time.Millisecond || took > 15*time.Second {
			return fmt.Errorf("delivered after %v, asked for %v", took, delay)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the reminder was never delivered")
	}
}
