package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// Apply declares a topology: exchanges, then queues, then bindings. It is
// declared again after every recovery.
func ExampleConn_Apply() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-apply", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Delete("example-apply")
	defer c.Close(ctx)

	t := acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.created").
		DeadLetters("orders.new")
	if err := c.Apply(ctx, t); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{"orders.new", "orders.new.dlq", "orders.new.parked"} {
		info, err := c.QueueInfo(ctx, q)
		fmt.Println(q, err == nil, info.Messages)
	}
	// Output:
	// orders.new true 0
	// orders.new.dlq true 0
	// orders.new.parked true 0
}

// Send returns once the broker has confirmed the message, with what went
// on the wire; the envelope id is the one to log.
func ExamplePublisher_Send() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-send", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Delete("example-send")
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.new", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		log.Fatal(err)
	}

	pub := acemq.NewPublisher[order](c, "", "orders.new", acemq.PublisherConfig{})
	sent, err := pub.SendWith(ctx, order{ID: "o-1"}, acemq.SendOptions{Type: "order.created"})
	if err != nil {
		var paused *acemq.PublishingPausedError
		if errors.As(err, &paused) {
			log.Print("publishing is paused; nothing was sent, retry later")
		}
		log.Fatal(err)
	}
	fmt.Println(sent.Outcome, sent.RoutingKey, sent.ContentType, sent.Envelope.Type, sent.Envelope.Attempt)
	// Output:
	// confirmed orders.new application/json order.created 1
}

// SendAll pipelines a batch: every message is written, then every confirm
// awaited. Results come back in payload order.
func ExamplePublisher_SendAll() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-sendall", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Delete("example-sendall")
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.new", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		log.Fatal(err)
	}

	pub := acemq.NewPublisher[order](c, "", "orders.new", acemq.PublisherConfig{})
	sents, err := pub.SendAll(ctx, []order{{ID: "o-1"}, {ID: "o-2"}, {ID: "o-3"}})
	var batch *acemq.BatchPublishError
	if errors.As(err, &batch) {
		// Resend only the failures: batch.Results[i].Err != nil.
		log.Fatal(batch)
	}
	fmt.Println(len(sents), sents[0].Outcome)
	info, _ := c.QueueInfo(ctx, "orders.new")
	fmt.Println(info.Messages, "messages on orders.new")
	// Output:
	// 3 confirmed
	// 3 messages on orders.new
}

// A handler returns a Decision; the engine acks, retries, dead-letters or
// parks. Here the failing message runs out of its single attempt and is
// set aside to orders.new.dlq with the reason.
func ExampleConsume() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-consume", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Delete("example-consume")
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.new", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	k, err := acemq.Consume(ctx, c, "orders.new", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		defer func() { done <- struct{}{} }()
		fmt.Println("handling", m.Payload.ID, "attempt", m.Envelope.Attempt)
		if m.Payload.ID == "bad" {
			return acemq.Retry(errors.New("no such customer"))
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
	if err != nil {
		log.Fatal(err)
	}
	pub := acemq.NewPublisher[order](c, "", "orders.new", acemq.PublisherConfig{})
	for _, id := range []string{"o-1", "bad"} {
		if _, err := pub.Send(ctx, order{ID: id}); err != nil {
			log.Fatal(err)
		}
		<-done
	}
	if err := k.Close(ctx); err != nil { // drains: the set-aside is complete
		log.Fatal(err)
	}

	p, err := c.NewPuller(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	m, ok, err := p.Pull(ctx, "orders.new.dlq")
	if err != nil || !ok {
		log.Fatal("nothing in the dlq: ", err)
	}
	fmt.Println(string(m.Body), "→", m.Envelope.Error)
	// Output:
	// handling o-1 attempt 1
	// handling bad attempt 1
	// {"id":"bad"} → exhausted 1 attempt: no such customer
}
