// Command scheduler is the program of docs/scheduler.md: a reminder
// scheduled two seconds ahead and delivered when it is due.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/schedule"
)

type Reminder struct {
	Order string `json:"order"`
	Text  string `json:"text"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	// The scheduler declares its ladder of TTL queues (acemq.schedule.1h …
	// .1s, acemq.schedule.due) and runs the control consumer. Any number of
	// processes may run one; they share the work.
	s, err := schedule.Start(ctx, c)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	if err := c.Apply(ctx, acemq.NewTopology().Queue("reminders", acemq.QueueOptions{})); err != nil {
		log.Fatal(err)
	}
	got := make(chan *acemq.Message[Reminder], 1)
	cons, err := acemq.Consume(ctx, c, "reminders", func(ctx context.Context, m *acemq.Message[Reminder]) acemq.Decision {
		got <- m
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	start := time.Now()
	err = schedule.After(ctx, c, "", "reminders", Reminder{Order: "o-1", Text: "ask for a review"}, 2*time.Second,
		schedule.WithCorrelationID("o-1"))
	if err != nil {
		log.Fatal(err)
	}

	m := <-got
	e := m.Envelope
	fmt.Printf("%s for %s after %s\n", m.Payload.Text, e.CorrelationID, time.Since(start).Round(100*time.Millisecond)) // up to a second early
	// Every delivery of one scheduled message has this id, a repeat too,
	// so idempotency.Guard runs the handler once.
	fmt.Println("type", e.Type, "id is DeliveryID(causation):", e.ID == schedule.DeliveryID(e.CausationID))
}
