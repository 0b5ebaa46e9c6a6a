// Command idempotency is the program of docs/idempotency.md: a message
// delivered twice runs its handler once.
package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency"
)

type Welcome struct {
	Email string `json:"email"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, "memory://mail", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("emails", acemq.QueueOptions{})); err != nil {
		log.Fatal(err)
	}

	// A key stays "done" for the store's retention (default 24 h): make it
	// longer than the longest way a message can come back. The SQL store
	// (idempotency.NewSQLStore) is the same for several processes.
	store := idempotency.NewMemoryStore(idempotency.WithRetention(48 * time.Hour))
	go idempotency.PruneEvery(ctx, store, time.Hour, nil) // frees space; changes no answer

	var sent atomic.Int32
	sendEmail := func(ctx context.Context, m *acemq.Message[Welcome]) acemq.Decision {
		sent.Add(1) // the effect to do once per message id
		return acemq.Accept()
	}
	guarded := idempotency.Guard(store, sendEmail) // an acemq.Handler[Welcome]

	deliveries := make(chan struct{}, 2)
	cons, err := acemq.Consume(ctx, c, "emails", func(ctx context.Context, m *acemq.Message[Welcome]) acemq.Decision {
		defer func() { deliveries <- struct{}{} }() // counts deliveries for this program
		return guarded(ctx, m)
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	// The same message twice (one envelope, so one id), as a publisher that
	// retried after a lost confirm would send it.
	env := acemq.NewEnvelope()
	for range 2 {
		if _, err := c.Publish(ctx, "", "emails", Welcome{Email: "ada@example.com"}, acemq.SendOptions{Envelope: &env}); err != nil {
			log.Fatal(err)
		}
	}
	<-deliveries
	<-deliveries
	fmt.Println("deliveries: 2, e-mails sent:", sent.Load())
}
