// Command slips is the program of docs/routing-slips.md: an order carries
// its itinerary (validate, charge, archive), and each step's consumer sends
// it on to the next.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/slip"
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
	top := acemq.NewTopology()
	for _, q := range []string{"validate", "charge", "orders.done"} {
		top.Queue(q, acemq.QueueOptions{}).DeadLetters(q)
	}
	if err := c.Apply(ctx, top); err != nil {
		log.Fatal(err)
	}

	// Each step is an ordinary consumer whose handler slip.Follow wraps:
	// when the handler accepts, Follow publishes the message to the next
	// step (confirmed) before the delivery is acked.
	for _, step := range []string{"validate", "charge"} {
		cons, err := acemq.Consume(ctx, c, step, slip.Follow(c, func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
			fmt.Println(step, m.Payload.ID)
			return acemq.Accept()
		}), acemq.ConsumerConfig{})
		if err != nil {
			log.Fatal(err)
		}
		defer cons.Close(ctx)
	}
	done := make(chan string, 1)
	last, err := acemq.Consume(ctx, c, "orders.done", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		_, s, err := slip.Of(m.Envelope) // the slip as it arrived: steps done and to do
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		done <- fmt.Sprintf("archived %s after %d steps", m.Payload.ID, len(s.Done))
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer last.Close(ctx)

	// The itinerary travels with the message: exchange, routing key, name.
	s, err := slip.New(
		slip.To("", "validate", "validate"),
		slip.To("", "charge", "charge"),
		slip.To("", "orders.done", "archive"),
	)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := slip.Start(ctx, c, s, Order{ID: "o-1", Cents: 1999}, acemq.SendOptions{}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-done)
}
