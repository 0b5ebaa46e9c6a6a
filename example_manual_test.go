package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
)

// The examples in this file are the code blocks of docs/publishing.md,
// docs/topology.md and docs/retries-and-dead-letters.md. They need a
// RabbitMQ node, so they are compiled, not run; the same calls run on
// memory:// in ExamplePublisher_Send, ExampleConn_Apply and ExampleConsume.

// How to read a send's error: what it says about whether the message
// arrived, and what to do next.
func ExamplePublisher_SendWith() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	pub := acemq.NewPublisher[order](c, "orders", "order.placed", acemq.PublisherConfig{})
	sent, err := pub.SendWith(ctx, order{ID: "o-1"}, acemq.SendOptions{Mandatory: true})
	var pe *acemq.PublishError
	switch {
	case err == nil:
		log.Printf("confirmed %s", sent.Envelope.ID) // the id to log
	case acemq.IsPaused(err):
		log.Print("blocked or recovering: nothing was sent; back off and send it again")
	case errors.Is(err, acemq.ErrHeaderLimit), errors.Is(err, acemq.ErrMessageTooLarge):
		log.Print("nothing was sent, and sending it again cannot help: change the message")
	case acemq.IsUnroutable(err):
		log.Print("the broker took it and no queue is bound to receive it: fix the bindings")
	case errors.As(err, &pe) && (pe.Nacked || !pe.Sent):
		log.Print("not taken, or certainly not sent: send it again")
	default:
		log.Print("it may have arrived: send it again only if a duplicate is acceptable")
	}
}

// Topology as data: validate without dialling, compare with the broker,
// then declare.
func ExampleConn_Plan() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	t := acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}). // durable quorum queue
		DeadLetters("orders.new").                 // acemq.dlx, orders.new.dlq, orders.new.parked
		Bind("orders.new", "orders", "order.*")
	if err := t.Validate(); err != nil { // never dials; names every problem
		log.Fatal(err)
	}
	plan, err := c.Plan(ctx, t) // changes nothing
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(plan)                         // one line per entity: would create, matches, differs, unknown
	if err := c.Apply(ctx, t); err != nil { // declared again after every recovery
		log.Fatal(err)
	}
}

// A handler answers every delivery with a decision; the engine carries it
// out.
func ExampleDecision() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	errDeclined := errors.New("card declined")
	charge := func(context.Context, order) error { return nil }

	k, err := acemq.Consume(ctx, c, "payments",
		func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			if m.Payload.ID == "" {
				return acemq.Reject(errors.New("the order has no id")) // → payments.dlq at once
			}
			switch err := charge(ctx, m.Payload); {
			case err == nil:
				return acemq.Accept()
			case errors.Is(err, errDeclined):
				return acemq.Park(err) // → payments.parked, for a person
			default:
				return acemq.Retry(err) // attempt + 1 after the policy's wait; exhausted → payments.dlq
			}
		},
		acemq.ConsumerConfig{Retry: acemq.Exponential(6, 10*time.Second, 5*time.Minute)})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close(ctx)
}
