// Command group shows a consumer group: four competing consumers share
// one queue, each with its own channel and prefetch, and are drained
// together. It runs on the in-process broker; -url runs it against
// RabbitMQ. It exits 0 only if every message was handled exactly once and
// the group drained cleanly.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/group"
)

func main() {
	url := flag.String("url", "memory://example-group", "broker URL (memory://name or amqp://…)")
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
	q := fmt.Sprintf("example.group.%d", time.Now().UnixNano())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()

	const n = 40
	var mu sync.Mutex
	seen := map[int]int{}
	all := make(chan struct{})
	g, err := group.Consume(ctx, c, q, 4, func(_ context.Context, m *acemq.Message[int]) acemq.Decision {
		mu.Lock()
		defer mu.Unlock()
		seen[m.Payload]++
		if len(seen) == n {
			close(all)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 5})
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := c.Publish(ctx, "", q, i, acemq.SendOptions{}); err != nil {
			return err
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		return fmt.Errorf("only %d of %d messages were handled", len(seen), n)
	}
	fmt.Printf("%d members (%s … %s) handled %d messages\n", g.Size(), g.Members()[0].Tag(), g.Members()[3].Tag(), n)
	if err := g.Close(ctx); err != nil {
		return fmt.Errorf("the group did not drain: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, k := range seen {
		if k != 1 {
			return fmt.Errorf("message %d was handled %d times", i, k)
		}
	}
	return nil
}
