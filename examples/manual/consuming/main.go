// Command consuming is the program of docs/consuming.md: a handler that
// returns a decision for each message, and the queues each one ends in.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

type Order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

var errStockDown = errors.New("the stock service is down")

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	err = c.Apply(ctx, acemq.NewTopology().
		Queue("orders.new", acemq.QueueOptions{}).DeadLetters("orders.new"))
	if err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Add(4) // four orders, each ends once
	handler := func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		o := m.Payload
		fmt.Printf("%s attempt %d (message %s)\n", o.ID, m.Envelope.Attempt, m.Envelope.ID)
		switch {
		case o.Cents < 0:
			wg.Done()
			return acemq.Reject(fmt.Errorf("order %s: a negative amount", o.ID)) // → orders.new.dlq
		case o.Cents > 1_000_000:
			wg.Done()
			return acemq.Park(errors.New("over the limit: a person must approve it")) // → orders.new.parked
		case o.ID == "o-3" && m.Envelope.Attempt == 1:
			return acemq.Retry(errStockDown) // attempt 2 after the policy's wait
		}
		wg.Done()
		return acemq.Accept()
	}
	cons, err := acemq.Consume(ctx, c, "orders.new", handler, acemq.ConsumerConfig{
		Prefetch:    20,                                                      // deliveries held at once
		Concurrency: 4,                                                       // handlers running at once
		Retry:       acemq.Exponential(3, 100*time.Millisecond, time.Second), // 3 attempts in all
	})
	if err != nil {
		log.Fatal(err)
	}

	for _, o := range []Order{{"o-1", 1999}, {"o-2", -5}, {"o-3", 700}, {"o-4", 5_000_000}} {
		if _, err := c.Publish(ctx, "", "orders.new", o, acemq.SendOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	wg.Wait()
	// Close stops the deliveries and waits for running handlers.
	if err := cons.Close(ctx); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{"orders.new", acemq.DeadLetterQueue("orders.new"), acemq.ParkedQueue("orders.new")} {
		info, err := c.QueueInfo(ctx, q)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(q, "holds", info.Messages)
	}
}
