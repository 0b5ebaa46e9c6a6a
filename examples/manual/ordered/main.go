// Command ordered is the program of docs/ordered.md: each order's events
// handled in the order they were sent, different orders in parallel.
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/ordered"
)

type Event struct {
	Order string `json:"order"`
	Kind  string `json:"kind"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	// The direct exchange "order-events" and 4 queues, order-events.p0 … .p3.
	const partitions = 4
	top, err := ordered.Topology("order-events", partitions)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Apply(ctx, top); err != nil {
		log.Fatal(err)
	}

	// The key picks the partition: one order's events share a queue.
	var wg sync.WaitGroup
	for _, order := range []string{"o-1", "o-2", "o-3"} {
		for _, kind := range []string{"created", "paid", "shipped"} {
			wg.Add(1)
			if _, err := ordered.Send(ctx, c, "order-events", partitions, order, Event{order, kind}, acemq.SendOptions{}); err != nil {
				log.Fatal(err)
			}
		}
	}

	// One consumer per partition, one message at a time each. A failure
	// stops its partition at the message (ordered.Stop, the default) rather
	// than let a later event of the same key overtake it.
	var mu sync.Mutex
	last := map[string]string{}
	k, err := ordered.Consume(ctx, c, "order-events", func(ctx context.Context, m *acemq.Message[Event]) acemq.Decision {
		e := m.Payload
		mu.Lock()
		fmt.Printf("%s: %s after %q\n", e.Order, e.Kind, last[e.Order])
		last[e.Order] = e.Kind
		mu.Unlock()
		wg.Done()
		return acemq.Accept()
	}, ordered.Partitions(partitions), ordered.OnFailure(ordered.RetryInPlace))
	if err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	if err := k.Close(ctx); err != nil {
		log.Fatal(err)
	}
}
