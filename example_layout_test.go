package acemq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq-go/acemq"
)

// The replicated layout is one setting on the Conn: every queue the
// library declares for itself (here through DeadLetters and Retries; a
// consumer's own dead-letter half and ladder alike) is a quorum queue.
func ExampleLayout() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://layout-example", acemq.Config{Layout: acemq.ReplicatedLayout})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	t := acemq.NewTopology().
		Queue("orders.new", acemq.QueueOptions{}).
		DeadLetters("orders.new").                         // orders.new.dlq, orders.new.parked: quorum, no delivery limit
		Retries("orders.new", acemq.Fixed(3, time.Minute)) // orders.new.retry.1m: quorum, at-least-once home
	plan, err := c.Plan(ctx, t) // what this Conn would declare, compared with the broker
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range plan.Items {
		if it.Declaration.Kind == acemq.DeclQueue {
			fmt.Println(it.Declaration)
		}
	}
	// Output:
	// queue orders.new (quorum, durable, x-dead-letter-exchange=acemq.dlx, x-dead-letter-routing-key=orders.new.dlq, x-queue-type=quorum)
	// queue orders.new.dlq (quorum, durable, x-delivery-limit=-1, x-queue-type=quorum)
	// queue orders.new.parked (quorum, durable, x-delivery-limit=-1, x-queue-type=quorum)
	// queue orders.new.retry.1m (quorum, durable, x-dead-letter-exchange=acemq.retry, x-dead-letter-routing-key=orders.new, x-dead-letter-strategy=at-least-once, x-message-ttl=60000, x-overflow=reject-publish, x-queue-type=quorum)
}
