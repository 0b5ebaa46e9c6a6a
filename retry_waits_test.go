package acemq_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// Where a retry's wait is held: on rungs (every broker), or inside the
// quorum queue with RabbitMQ 4.3's delayed retry (RetryWaits). These run
// without a broker; retry_in_queue_rabbit_test.go runs the queue on the
// test node.

func TestLinearWaitsGrowByTheStepUpToTheCap(t *testing.T) {
	p := acemq.Linear(6, 10*time.Second, 25*time.Second)
	want := []time.Duration{10 * time.Second, 20 * time.Second, 25 * time.Second, 25 * time.Second, 25 * time.Second}
	if got := p.Schedule(); !reflect.DeepEqual(got, want) || p.Err() != nil {
		t.Fatalf("Linear(6, 10s, 25s) schedule %v (err %v), want %v", got, p.Err(), want)
	}
	if got := p.String(); got != "linear(6, 10s, 25s)" {
		t.Fatalf("String() = %q", got)
	}
	for _, bad := range []acemq.RetryPolicy{acemq.Linear(0, time.Second, time.Second), acemq.Linear(3, 0, time.Second), acemq.Linear(3, 2*time.Second, time.Second)} {
		var ce *acemq.ConfigurationError
		if !errors.As(bad.Err(), &ce) {
			t.Errorf("%v: Err() = %v, want a *ConfigurationError", bad, bad.Err())
		}
	}
}

func TestHoldWaitsInTheQueueRefusesASchedulesTheBrokerCannotHold(t *testing.T) {
	cases := []struct {
		p    acemq.RetryPolicy
		want string // "" for usable
	}{
		{acemq.Linear(5, time.Second, 4*time.Second), ""},
		{acemq.Fixed(3, 2*time.Second), ""},
		{acemq.Exponential(3, time.Minute, time.Minute), ""}, // does not grow
		{acemq.NoRetry(), ""},                                // never waits
		{acemq.Exponential(4, time.Second, time.Minute), "grows linearly"},
		{acemq.Fixed(3, 0), "at least 1ms"},
		{acemq.Fixed(3, 1500*time.Microsecond), "whole milliseconds"},
	}
	for _, w := range []acemq.RetryWaits{acemq.WaitsInQueue, acemq.WaitsInQueueWhereSupported} {
		for _, tc := range cases {
			p := tc.p.HoldWaits(w)
			err := p.Err()
			var ce *acemq.ConfigurationError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v: Err() = %v, want nil", p, err)
			case tc.want != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%v: Err() = %v, want a *ConfigurationError saying %q", p, err, tc.want)
			}
		}
	}
	if p := acemq.Fixed(3, time.Second).HoldWaits(acemq.RetryWaits(7)); p.Err() == nil {
		t.Fatal("an unknown RetryWaits value was accepted")
	}
}

func TestDelayedRetryArgumentsAreTheBrokersMinAndMax(t *testing.T) {
	cases := []struct {
		p    acemq.RetryPolicy
		want transport.Table
	}{
		{acemq.Linear(5, 10*time.Second, time.Minute).HoldWaits(acemq.WaitsInQueue),
			transport.Table{"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(10000), "x-delayed-retry-max": int64(60000)}},
		{acemq.Fixed(3, 2*time.Second).HoldWaits(acemq.WaitsInQueueWhereSupported),
			transport.Table{"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(2000), "x-delayed-retry-max": int64(2000)}},
		{acemq.Linear(5, 10*time.Second, time.Minute), nil}, // on rungs
		{acemq.NoRetry().HoldWaits(acemq.WaitsInQueue), nil},
	}
	for _, tc := range cases {
		if got := tc.p.DelayedRetryArgumentsForTest(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: delayedRetryArguments() = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := acemq.Linear(5, time.Second, 3*time.Second).HoldWaits(acemq.WaitsInQueue).BrokerDelays(); len(got) != 0 {
		t.Fatalf("a policy holding its waits in the queue lists rungs %v", got)
	}
}

// declared finds the declaration of kind and name in decls.
func declared(decls []acemq.Declaration, kind acemq.DeclKind, name string) (acemq.Declaration, bool) {
	for _, d := range decls {
		switch {
		case d.Kind != kind:
		case kind == acemq.DeclExchange && d.Exchange.Name == name,
			kind == acemq.DeclQueue && d.Queue.Name == name,
			kind == acemq.DeclBinding && d.Binding.Queue == name && d.Binding.Exchange == acemq.RetryExchange:
			return d, true
		}
	}
	return acemq.Declaration{}, false
}

func TestTopologyHoldsWaitsInTheQueueWithoutALadder(t *testing.T) {
	p := acemq.Linear(4, time.Minute, 2*time.Minute)
	tp := acemq.NewTopology().Queue("orders", acemq.QueueOptions{}).DeadLetters("orders").Retries("orders", p.HoldWaits(acemq.WaitsInQueue))
	if err := tp.Validate(); err != nil {
		t.Fatal(err)
	}
	decls := tp.Declarations()
	q, _ := declared(decls, acemq.DeclQueue, "orders")
	for name, v := range map[string]any{"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(60000), "x-delayed-retry-max": int64(120000), "x-queue-type": "quorum", "x-dead-letter-exchange": acemq.DeadLetterExchange} {
		if q.Queue.Args[name] != v {
			t.Errorf("orders is declared with %s=%v, want %v (all: %v)", name, q.Queue.Args[name], v, q.Queue.Args)
		}
	}
	for _, rung := range []string{acemq.RetryQueue("orders", time.Minute), acemq.RetryQueue("orders", 2*time.Minute)} {
		if _, ok := declared(decls, acemq.DeclQueue, rung); ok {
			t.Errorf("rung %s is declared; the queue holds the waits", rung)
		}
	}
	if _, ok := declared(decls, acemq.DeclExchange, acemq.RetryExchange); ok {
		t.Error("acemq.retry is declared; no rung needs it")
	}

	// WaitsInQueueWhereSupported: the topology alone lists what every
	// broker takes, the ladder; Conn.Apply chooses on the broker.
	tp = acemq.NewTopology().Queue("orders", acemq.QueueOptions{}).Retries("orders", p.HoldWaits(acemq.WaitsInQueueWhereSupported))
	decls = tp.Declarations()
	q, _ = declared(decls, acemq.DeclQueue, "orders")
	if _, ok := q.Queue.Args["x-delayed-retry-type"]; ok {
		t.Errorf("where supported, Declarations already carries the delayed retry arguments: %v", q.Queue.Args)
	}
	if _, ok := declared(decls, acemq.DeclQueue, acemq.RetryQueue("orders", 2*time.Minute)); !ok {
		t.Errorf("where supported, Declarations lacks the rung %s", acemq.RetryQueue("orders", 2*time.Minute))
	}
}

func TestValidateRefusesWaitsInAQueueThatCannotHoldThem(t *testing.T) {
	in := func(p acemq.RetryPolicy) acemq.RetryPolicy { return p.HoldWaits(acemq.WaitsInQueue) }
	cases := []struct {
		name string
		tp   *acemq.Topology
		want string
	}{
		{"a classic queue", acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic}).Retries("q", in(acemq.Fixed(3, time.Second))),
			`queue "q" in the queue, but it is a classic queue`},
		{"a queue the topology does not declare", acemq.NewTopology().Retries("q", in(acemq.Fixed(3, time.Second))),
			`this topology does not declare it`},
		{"more retries than RabbitMQ 4's default delivery limit", acemq.NewTopology().Queue("q", acemq.QueueOptions{}).Retries("q", in(acemq.Fixed(22, time.Second))),
			`holds 21 retries in the queue, but RabbitMQ ends a message there after 20 returns (RabbitMQ 4's default)`},
		{"more retries than the queue's delivery limit", acemq.NewTopology().Queue("q", acemq.QueueOptions{DeliveryLimit: 3}).Retries("q", in(acemq.Fixed(5, time.Second))),
			`after 3 returns (its x-delivery-limit): set QueueOptions{DeliveryLimit: 4}`},
		{"delayed retry arguments of its own", acemq.NewTopology().Queue("q", acemq.QueueOptions{Args: transport.Table{"x-delayed-retry-min": int64(5)}}).Retries("q", in(acemq.Fixed(3, time.Second))),
			`sets x-delayed-retry-min=5`},
	}
	for _, tc := range cases {
		err := tc.tp.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
	ok := acemq.NewTopology().Queue("q", acemq.QueueOptions{DeliveryLimit: -1}).Retries("q", in(acemq.Fixed(30, time.Second)))
	if err := ok.Validate(); err != nil {
		t.Fatalf("no delivery limit (-1) and 29 retries: %v", err)
	}
}

// memory:// holds no waits inside a queue: a policy that must hold them
// there is refused, naming why, and one that holds them there where
// supported waits on rungs, as the plan says.
func TestMemoryRefusesWaitsInTheQueueAndPlansRungsWhereSupported(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p := acemq.Fixed(3, time.Minute)
	err := r.c.Apply(ctx, acemq.NewTopology().Queue("held", acemq.QueueOptions{}).Retries("held", p.HoldWaits(acemq.WaitsInQueue)))
	if err == nil || !strings.Contains(err.Error(), "memory:// holds no waits inside a queue") {
		t.Fatalf("Apply with WaitsInQueue on memory:// = %v, want a refusal naming memory://", err)
	}
	if err := r.c.Apply(ctx, acemq.NewTopology().Queue("plain", acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	_, err = acemq.Consume(ctx, r.c, "plain", func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() },
		acemq.ConsumerConfig{Retry: p.HoldWaits(acemq.WaitsInQueue)})
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "memory://") {
		t.Fatalf("Consume with WaitsInQueue on memory:// = %v, want a *ConfigurationError naming memory://", err)
	}

	tp := acemq.NewTopology().Queue("where", acemq.QueueOptions{}).Retries("where", p.HoldWaits(acemq.WaitsInQueueWhereSupported))
	plan, err := r.c.Plan(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Retries) != 1 || plan.Retries[0].Waits != acemq.WaitsOnRungs || !strings.Contains(plan.Retries[0].Why, "memory://") ||
		!strings.Contains(plan.String(), "retries of queue where (fixed(3, 1m0s).holdWaits(in the queue where supported)): waits on rungs: ") {
		t.Fatalf("plan.Retries %+v, want one entry on rungs naming memory://; plan:\n%s", plan.Retries, plan)
	}
	if err := r.c.Apply(ctx, tp); err != nil {
		t.Fatal(err)
	}
	if !r.exists(acemq.RetryQueue("where", time.Minute)) {
		t.Fatalf("Apply where supported on memory:// did not declare the rung %s", acemq.RetryQueue("where", time.Minute))
	}
}

// A consumer whose policy holds its waits in the queue where supported
// keeps them on rungs for a queue its Conn declared without the delayed
// retry arguments (a classic one here), whatever the broker.
func TestConsumeWhereSupportedKeepsRungsOnAQueueDeclaredWithoutTheArguments(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.queue("plain") // classic, declared by this Conn
	_, err := acemq.Consume(ctx, r.c, "plain", func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() },
		acemq.ConsumerConfig{Retry: acemq.Fixed(3, time.Second).HoldWaits(acemq.WaitsInQueueWhereSupported)})
	if err != nil {
		t.Fatalf("where supported, a queue without the arguments keeps the rungs: %v", err)
	}
}
