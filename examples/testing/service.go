package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/schedule"
)

// The service: it takes orders from orders.new, asks the payments service
// to charge each one (request/reply), retries while payments fails,
// rejects a declined card at once, and schedules a reminder an hour after
// a payment, which it handles from orders.reminders.

// Order is what the service consumes.
type Order struct {
	ID    string `json:"id"`
	Card  string `json:"card"`
	Cents int    `json:"cents"`
}

// Charge is the payments service's answer.
type Charge struct {
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
}

// Topology is the service's: its exchange and queues, and the payments
// exchange it sends requests to.
func Topology() *acemq.Topology {
	return acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Exchange("payments", acemq.Direct, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.placed").
		Queue("orders.reminders", acemq.QueueOptions{}).
		Bind("orders.reminders", "orders", "order.remind")
}

// Retry is the service's retry policy for orders: six attempts, waits of
// 10 s doubling to 5 minutes (those of 30 s and more on broker rungs).
var Retry = acemq.Exponential(6, 10*time.Second, 5*time.Minute)

// ReminderDelay is how long after its payment an order is reminded.
const ReminderDelay = time.Hour

// Service is the running service.
type Service struct {
	// Reminded counts the reminders handled.
	Reminded atomic.Int64
}

// Start starts the service's consumers on c; they stop when c closes.
func Start(ctx context.Context, c *acemq.Conn) (*Service, error) {
	s := &Service{}
	payments, err := rpc.NewRequester(ctx, c)
	if err != nil {
		return nil, err
	}
	if _, err := acemq.Consume(ctx, c, "orders.new", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		charge, err := rpc.Request[Order, Charge](ctx, payments, "payments", "charge", m.Payload)
		if err != nil {
			return acemq.Retry(err) // payments down, slow or failing: try again later
		}
		if !charge.Approved {
			return acemq.Reject(errors.New("the card was declined: " + charge.Reason))
		}
		if err := schedule.After(ctx, c, "orders", "order.remind", m.Payload, ReminderDelay); err != nil {
			return acemq.Retry(err)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: Retry}); err != nil {
		return nil, err
	}
	if _, err := acemq.Consume(ctx, c, "orders.reminders", func(ctx context.Context, m *acemq.Message[Order]) acemq.Decision {
		s.Reminded.Add(1)
		return acemq.Accept()
	}, acemq.ConsumerConfig{}); err != nil {
		return nil, err
	}
	return s, nil
}
