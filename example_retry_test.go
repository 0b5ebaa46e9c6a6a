package acemq_test

import (
	"fmt"
	"time"

	"github.com/acemq-go/acemq"
)

// Exponential doubles the wait from the initial delay up to the cap; the
// schedule has one entry per retry (attempts − 1). Waits of 30 s or more
// are held on broker rungs.
func ExampleExponential() {
	p := acemq.Exponential(6, 10*time.Second, 5*time.Minute)
	fmt.Println(p)
	fmt.Println(p.Schedule())
	fmt.Println(p.BrokerDelays())
	for _, d := range p.BrokerDelays() {
		fmt.Println(acemq.RetryQueue("orders.new", d))
	}
	// Output:
	// exponential(6, 10s, 5m0s)
	// [10s 20s 40s 1m20s 2m40s]
	// [40s 1m20s 2m40s]
	// orders.new.retry.40s
	// orders.new.retry.80s
	// orders.new.retry.160s
}

// Describe lists what a topology declares without dialling.
func ExampleTopology_Describe() {
	t := acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		DeadLetters("orders.new").
		Bind("orders.new", "orders", "order.*")
	if err := t.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(t.Describe())
	// Output:
	// Topology: 2 exchanges, 3 queues, 3 bindings
	//   exchange orders (topic, durable)
	//   exchange acemq.dlx (direct, durable)
	//   queue orders.new (quorum, durable, x-dead-letter-exchange=acemq.dlx, x-dead-letter-routing-key=orders.new.dlq, x-queue-type=quorum)
	//   queue orders.new.dlq (classic, durable)
	//   queue orders.new.parked (classic, durable)
	//   binding orders.new.dlq <- acemq.dlx (key "orders.new.dlq")
	//   binding orders.new.parked <- acemq.dlx (key "orders.new.parked")
	//   binding orders.new <- orders (key "order.*")
}

// HoldWaits(WaitsInQueue) keeps the waits inside the quorum queue, with
// RabbitMQ 4.3's delayed retry: Retries writes the queue's delayed retry
// arguments (min × delivery count, capped at max) instead of a ladder.
func ExampleRetryPolicy_HoldWaits() {
	p := acemq.Linear(5, 10*time.Second, time.Minute).HoldWaits(acemq.WaitsInQueue)
	fmt.Println(p)
	fmt.Println(p.Schedule())
	t := acemq.NewTopology().
		Queue("orders.new", acemq.QueueOptions{}).
		DeadLetters("orders.new").
		Retries("orders.new", p)
	if err := t.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(t.Describe())
	// Output:
	// linear(5, 10s, 1m0s).holdWaits(in the queue)
	// [10s 20s 30s 40s]
	// Topology: 1 exchanges, 3 queues, 2 bindings
	//   exchange acemq.dlx (direct, durable)
	//   queue orders.new (quorum, durable, x-dead-letter-exchange=acemq.dlx, x-dead-letter-routing-key=orders.new.dlq, x-delayed-retry-max=60000, x-delayed-retry-min=10000, x-delayed-retry-type=failed, x-queue-type=quorum)
	//   queue orders.new.dlq (classic, durable)
	//   queue orders.new.parked (classic, durable)
	//   binding orders.new.dlq <- acemq.dlx (key "orders.new.dlq")
	//   binding orders.new.parked <- acemq.dlx (key "orders.new.parked")
}
