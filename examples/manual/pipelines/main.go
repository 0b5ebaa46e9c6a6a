// Command pipelines is the program of docs/pipelines.md: a declared
// pipeline of typed steps, each a consumer group of its own queue.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/pipeline"
)

type Order struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

type Priced struct {
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

	done := make(chan string, 2)
	// Each step's output type is the next step's input type; New checks it.
	p, err := pipeline.New("orders",
		pipeline.NewStep("validate", func(ctx context.Context, m *acemq.Message[Order]) (Order, bool, error) {
			if m.Payload.Items == 0 {
				done <- m.Payload.ID + " ended early: empty"
				return Order{}, false, nil // the run ends here, accepted
			}
			if m.Payload.Items < 0 {
				return Order{}, false, acemq.Fatal(errors.New("negative items")) // orders.validate.dlq
			}
			return m.Payload, true, nil
		}),
		pipeline.NewStep("price", func(ctx context.Context, m *acemq.Message[Order]) (Priced, bool, error) {
			return Priced{ID: m.Payload.ID, Cents: 250 * m.Payload.Items}, true, nil
		}, pipeline.Consumers(2), pipeline.StepRetry(acemq.Exponential(3, time.Second, 10*time.Second))),
		pipeline.NewStep("invoice", func(ctx context.Context, m *acemq.Message[Priced]) (struct{}, bool, error) {
			done <- fmt.Sprintf("%s invoiced at %d (step %d of %v)", m.Payload.ID, m.Payload.Cents, m.Envelope.RoutePosition, m.Envelope.Route)
			return struct{}{}, true, nil // the last step's output is dropped
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	// The direct exchange "orders" and a queue per step: orders.validate, ...
	if err := c.Apply(ctx, p.Topology()); err != nil {
		log.Fatal(err)
	}
	run, err := p.Start(ctx, c) // every step's consumers
	if err != nil {
		log.Fatal(err)
	}
	defer run.Close(ctx)

	for _, o := range []Order{{"o-1", 3}, {"o-2", 0}} {
		if _, err := p.Send(ctx, c, o, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(<-done)
	fmt.Println(<-done)
}
