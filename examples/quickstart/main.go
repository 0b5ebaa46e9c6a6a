// Command quickstart is the first journey: declare a topology, publish
// orders with confirms (one at a time and as a pipelined batch), and
// consume them with a handler that returns a decision. It runs with
// nothing installed (memory:// broker) or against RabbitMQ:
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -url amqp://guest:guest@127.0.0.1:5672/
//
// (or set ACEMQ_URL). It exits 0 only if every order sent was handled
// exactly once, with the id Send returned.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/acemq-go/acemq"
)

// Order is the message: a plain struct, JSON on the wire by default.
type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://quickstart"), "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background()) // drains the consumer under one deadline

	// Unique names, so the example never meets a previous run's messages.
	suffix := time.Now().Format("150405.000000")
	exchange, queue := "example.orders."+suffix, "example.orders.new."+suffix
	if err := c.Apply(ctx, acemq.NewTopology().
		Exchange(exchange, acemq.Topic, acemq.ExchangeOptions{}).
		Queue(queue, acemq.QueueOptions{}).DeadLetters(queue). // a quorum queue with {queue}.dlq and .parked
		Bind(queue, exchange, "order.*")); err != nil {
		return err
	}
	defer func() {
		for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()

	// Consume: the handler says what happens to each message.
	handled := make(chan string, 64)
	cons, err := acemq.Consume(ctx, c, queue, func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		if m.Payload.Cents <= 0 {
			return acemq.Reject(errors.New("an order must cost something")) // → {queue}.dlq
		}
		handled <- m.Envelope.ID
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}

	// Publish: Send returns once the broker confirmed the message.
	pub := acemq.NewPublisher[Order](c, exchange, "order.placed", acemq.PublisherConfig{})
	sent := map[string]bool{}
	s, err := pub.Send(ctx, Order{ID: "o-1", Cents: 1999})
	if err != nil {
		return err
	}
	sent[s.Envelope.ID] = true
	fmt.Printf("sent o-1 as message %s\n", s.Envelope.ID)

	// A batch is pipelined: every confirm is outstanding at once.
	batch := make([]Order, 20)
	for i := range batch {
		batch[i] = Order{ID: fmt.Sprintf("o-%d", i+2), Cents: 100 * (i + 1)}
	}
	sents, err := pub.SendAll(ctx, batch)
	if err != nil {
		return err
	}
	for _, s := range sents {
		sent[s.Envelope.ID] = true
	}
	fmt.Printf("sent a batch of %d, all confirmed\n", len(sents))

	for len(sent) > 0 {
		select {
		case id := <-handled:
			if !sent[id] {
				return fmt.Errorf("message %s was handled twice or was never sent", id)
			}
			delete(sent, id)
		case <-ctx.Done():
			return fmt.Errorf("%d orders were not handled in time", len(sent))
		}
	}
	if err := cons.Close(ctx); err != nil {
		return err
	}
	fmt.Println("all 21 orders handled exactly once")
	fmt.Println("OK")
	return nil
}
