// Command ordered shows ordered processing: events of three orders are
// spread over four partitions by key, and each order's events are handled
// in the order they were sent while partitions run in parallel. It runs
// on the in-process broker; -url runs it against RabbitMQ. It exits 0
// only if every order's events arrived complete and in order.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/ordered"
)

type event struct {
	Order string `json:"order"`
	Seq   int    `json:"seq"`
}

func main() {
	url := flag.String("url", "memory://example-ordered", "broker URL (memory://name or amqp://…)")
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
	const partitions, perOrder = 4, 10
	name := fmt.Sprintf("example-ordered-%d", time.Now().UnixNano())
	top, err := ordered.Topology(name, partitions)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, top); err != nil {
		return err
	}
	defer func() {
		for p := range partitions {
			q := ordered.Queue(name, p)
			for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
				_, _ = c.DeleteQueue(context.Background(), n)
			}
		}
	}()
	orders := []string{"o-1", "o-2", "o-3"}
	for i := range perOrder {
		for _, o := range orders {
			if _, err := ordered.Send(ctx, c, name, partitions, o, event{Order: o, Seq: i}, acemq.SendOptions{}); err != nil {
				return err
			}
		}
	}
	var mu sync.Mutex
	seen := map[string][]int{}
	var wg sync.WaitGroup
	wg.Add(len(orders) * perOrder)
	k, err := ordered.Consume(ctx, c, name, func(_ context.Context, m *acemq.Message[event]) acemq.Decision {
		mu.Lock()
		seen[m.Payload.Order] = append(seen[m.Payload.Order], m.Payload.Seq)
		mu.Unlock()
		wg.Done()
		return acemq.Accept()
	}, ordered.Partitions(partitions))
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		_ = k.Close(context.Background())
		return fmt.Errorf("not every event arrived: %v", seen)
	}
	if err := k.Close(ctx); err != nil {
		return err
	}
	want := make([]int, perOrder)
	for i := range want {
		want[i] = i
	}
	for _, o := range orders {
		fmt.Printf("%s (partition %d): %v\n", o, ordered.Partition(o, partitions), seen[o])
		if !slices.Equal(seen[o], want) {
			return fmt.Errorf("%s's events arrived as %v, want %v", o, seen[o], want)
		}
	}
	return nil
}
