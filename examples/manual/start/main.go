// Command start is the first program of the manual: it declares a queue,
// publishes an order and handles it, all on the in-process broker.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
)

// Order is the message: a plain struct, JSON on the wire.
type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// memory:// is a broker inside this process; for RabbitMQ give
	// "amqp://guest:guest@localhost:5672/".
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx) // drains the consumer

	// Topology is data: an exchange, a queue with its dead-letter queues
	// (orders.new.dlq, orders.new.parked) and a binding.
	err = c.Apply(ctx, acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).DeadLetters("orders.new").
		Bind("orders.new", "orders", "order.*"))
	if err != nil {
		log.Fatal(err)
	}

	// The handler returns a decision; the library acks, retries or sets
	// the message aside.
	done := make(chan string, 1)
	cons, err := acemq.Consume(ctx, c, "orders.new",
		func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
			if m.Payload.Cents <= 0 {
				return acemq.Reject(errors.New("an order must cost something")) // → orders.new.dlq
			}
			done <- m.Payload.ID
			return acemq.Accept()
		},
		acemq.ConsumerConfig{Retry: acemq.Exponential(5, time.Second, time.Minute)})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	// Send returns once the broker has confirmed the message.
	pub := acemq.NewPublisher[Order](c, "orders", "order.placed", acemq.PublisherConfig{})
	sent, err := pub.Send(ctx, Order{ID: "o-1", Cents: 1999})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent o-1 as message", sent.Envelope.ID)

	select {
	case id := <-done:
		fmt.Println("handled order", id)
	case <-ctx.Done():
		log.Fatal("the order was not handled in time")
	}
}
