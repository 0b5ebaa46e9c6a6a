// Command slip shows a routing slip: an order carries its itinerary
// (validate, charge, archive) and each step, a consumer wrapped in
// slip.Follow, sends it on before accepting it. It runs on the
// in-process broker; -url runs it against RabbitMQ. It exits 0 only if
// the order went through every step in order and arrived with two steps
// done.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/slip"
)

func main() {
	url := flag.String("url", "memory://example-slip", "broker URL (memory://name or amqp://…)")
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
	base := fmt.Sprintf("example.slip.%d", time.Now().UnixNano())
	validate, charge, archive := base+".validate", base+".charge", base+".archive"
	t := acemq.NewTopology()
	for _, q := range []string{validate, charge, archive} {
		t.Queue(q, acemq.QueueOptions{Type: acemq.Classic})
	}
	if err := c.Apply(ctx, t); err != nil {
		return err
	}
	defer func() {
		for _, q := range []string{validate, charge, archive} {
			for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
				_, _ = c.DeleteQueue(context.Background(), name)
			}
		}
	}()

	var mu sync.Mutex
	var trail []string
	var consumers []*acemq.Consumer
	defer func() {
		for _, k := range consumers {
			_ = k.Close(context.Background())
		}
	}()
	for _, step := range []string{validate, charge} {
		k, err := acemq.Consume(ctx, c, step, slip.Follow(c, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
			mu.Lock()
			trail = append(trail, step[len(base)+1:])
			mu.Unlock()
			return acemq.Accept()
		}), acemq.ConsumerConfig{})
		if err != nil {
			return err
		}
		consumers = append(consumers, k)
	}
	arrived := make(chan int, 1)
	k, err := acemq.Consume(ctx, c, archive, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		_, s, err := slip.Of(m.Envelope)
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		arrived <- len(s.Done)
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	consumers = append(consumers, k)

	s, err := slip.New(slip.To("", validate, "validate"), slip.To("", charge, "charge"), slip.To("", archive, "archive"))
	if err != nil {
		return err
	}
	if _, err := slip.Start(ctx, c, s, "order o-1", acemq.SendOptions{}); err != nil {
		return err
	}
	select {
	case done := <-arrived:
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("order went through %s and arrived with %d steps done\n", strings.Join(trail, " → "), done)
		if done != 2 || strings.Join(trail, ",") != "validate,charge" {
			return fmt.Errorf("steps %v, %d done; want validate,charge and 2", trail, done)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the order never reached the archive (steps run: %v)", trail)
	}
}
