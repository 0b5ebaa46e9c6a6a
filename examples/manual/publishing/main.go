// Command publishing is the program of docs/publishing.md: one send, a
// send with options, a batch, and what to do with each kind of failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
)

type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.Apply(ctx, acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.*"))
	if err != nil {
		log.Fatal(err)
	}

	// One publisher per message type and destination; safe for concurrent use.
	// Mandatory: a message no queue takes is an error, not a silent drop.
	pub := acemq.NewPublisher[Order](c, "orders", "order.placed", acemq.PublisherConfig{Mandatory: true})

	// Send returns once the broker has confirmed the message.
	sent, err := pub.Send(ctx, Order{ID: "o-1", Cents: 1999})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sent.Outcome, "o-1 as message", sent.Envelope.ID) // the id to log

	// SendWith overrides the publisher's settings for one send.
	_, err = pub.SendWith(ctx, Order{ID: "o-2", Cents: 500}, acemq.SendOptions{
		CorrelationID: "checkout-42",
		Headers:       map[string]any{"x-shop-region": "eu"},
	})
	if err != nil {
		log.Fatal(err)
	}

	// SendAll pipelines a batch: every message is written, then every
	// confirm awaited. A partial failure says which ones to send again.
	batch := []Order{{ID: "o-3", Cents: 100}, {ID: "o-4", Cents: 200}}
	sents, err := pub.SendAll(ctx, batch)
	var be *acemq.BatchPublishError
	switch {
	case errors.As(err, &be):
		for i, r := range be.Results {
			if r.Err != nil {
				fmt.Println("send again:", batch[i].ID, r.Err)
			}
		}
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("batch confirmed:", len(sents))

	// A routing key nothing is bound to: the broker returns the message.
	_, err = pub.SendWith(ctx, Order{ID: "o-5"}, acemq.SendOptions{RoutingKey: "refund.placed"})
	var pe *acemq.PublishError
	switch {
	case acemq.IsUnroutable(err):
		fmt.Println("unroutable: fix the bindings")
	case acemq.IsPaused(err):
		fmt.Println("paused (an alarm or a recovery): nothing was sent, safe to retry")
	case errors.As(err, &pe) && pe.Sent:
		fmt.Println("may have arrived: retry only if the consumer tolerates a duplicate")
	case err != nil:
		log.Fatal(err)
	}
}
