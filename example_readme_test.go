//lint:file-ignore SA4006,SA5001 the README's sketch shows the calls without their error checks; every other example checks them

package acemq_test

import (
	"context"
	"time"

	"github.com/acemq-go/acemq"
)

// The README's sixty seconds of API: connect, declare, publish, consume.
// It needs a RabbitMQ node, so it is compiled, not run; the same calls run
// on memory:// in ExampleConn_Apply, ExamplePublisher_Send and
// ExampleConsume.
func Example_sixtySeconds() {
	ctx := context.Background()
	type Order struct{ ID string }
	orders := []Order{{ID: "o-2"}, {ID: "o-3"}}
	charge := func(context.Context, Order) error { return nil }

	c, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{}) // or "memory://tests"
	defer c.Close(ctx)                                                                 // drains consumers under one deadline (20s)

	// Topology is data: validate, plan, apply. Source queues are quorum by default.
	err = c.Apply(ctx, acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).DeadLetters("orders.new").
		Bind("orders.new", "orders", "order.*"))

	// Publish: confirmed, persistent; returns what went on the wire.
	pub := acemq.NewPublisher[Order](c, "orders", "order.placed", acemq.PublisherConfig{})
	sent, err := pub.Send(ctx, Order{ID: "o-1"}) // sent.Envelope.ID is the id to log
	sents, err := pub.SendAll(ctx, orders)       // pipelined, in waves under the ceiling

	// Consume: the handler returns a decision; the engine settles it.
	cons, err := acemq.Consume(ctx, c, "orders.new",
		func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
			if err := charge(ctx, m.Payload); err != nil {
				return acemq.Retry(err) // attempt+1 after a back-off; exhausted → orders.new.dlq
			}
			return acemq.Accept()
		},
		acemq.ConsumerConfig{Retry: acemq.Exponential(6, 10*time.Second, 5*time.Minute)})

	_, _, _, _ = sent, sents, cons, err
}
