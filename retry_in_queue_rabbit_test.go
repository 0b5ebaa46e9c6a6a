package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// TestRabbitHoldsRetryWaitsInTheQuorumQueue: on RabbitMQ 4.3 a policy
// that holds its waits in the queue declares the quorum queue with its
// delayed retry arguments and no ladder; each retry is the same message
// handed back (a broker redelivery, no copy), held by the broker for
// min(step × n, max); the handler sees attempts 1, 2, 3, 4 from the
// broker's x-delivery-count, and the last failure goes to {q}.dlq with
// attempt 4. On an older broker WaitsInQueue is refused, naming the
// version, and WaitsInQueueWhereSupported plans and declares the rungs.
func TestRabbitHoldsRetryWaitsInTheQuorumQueue(t *testing.T) {
	r := newRabbitRig(t)
	ctx := context.Background()
	product, version := r.c.Broker()
	if product != "RabbitMQ" || version == "" {
		t.Fatalf("Conn.Broker() = %q, %q; want RabbitMQ and its version", product, version)
	}
	q := r.named("held")
	policy := acemq.Linear(4, 300*time.Millisecond, 600*time.Millisecond)
	tp := func(w acemq.RetryWaits) *acemq.Topology {
		return acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q).Retries(q, policy.HoldWaits(w))
	}

	if !versionAtLeast(t, version, 4, 3) {
		err := r.c.Apply(ctx, tp(acemq.WaitsInQueue))
		if err == nil || !strings.Contains(err.Error(), "RabbitMQ "+version+" has no delayed retry (4.3 added it)") {
			t.Fatalf("Apply with WaitsInQueue on RabbitMQ %s = %v, want a refusal naming the version", version, err)
		}
		plan, err := r.c.Plan(ctx, tp(acemq.WaitsInQueueWhereSupported))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Retries) != 1 || plan.Retries[0].Waits != acemq.WaitsOnRungs {
			t.Fatalf("plan.Retries on RabbitMQ %s: %+v, want the rungs", version, plan.Retries)
		}
		if err := r.c.Apply(ctx, tp(acemq.WaitsInQueueWhereSupported)); err != nil {
			t.Fatal(err)
		}
		// The ladder's rungs (300ms and 600ms) are below the broker-wait
		// threshold: the waits are the consumer's, and no rung is declared.
		return
	}

	plan, err := r.c.Plan(ctx, tp(acemq.WaitsInQueueWhereSupported))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Retries) != 1 || plan.Retries[0].Waits != acemq.WaitsInQueue || !strings.Contains(plan.Retries[0].Why, "RabbitMQ "+version+" holds them in the queue") {
		t.Fatalf("plan.Retries on RabbitMQ %s: %+v, want the waits in the queue", version, plan.Retries)
	}
	if err := r.c.Apply(ctx, tp(acemq.WaitsInQueue)); err != nil {
		t.Fatal(err)
	}
	// A queue this Conn declared without the arguments cannot hold the
	// waits: handing a delivery back would bring it straight back.
	plain := r.named("plain")
	r.queue(plain)
	_, err = acemq.Consume(ctx, r.c, plain, func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() },
		acemq.ConsumerConfig{Retry: policy.HoldWaits(acemq.WaitsInQueue)})
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "declared the queue without its delayed retry arguments") {
		t.Fatalf("Consume with WaitsInQueue on a queue declared without the arguments = %v, want a *ConfigurationError saying so", err)
	}
	type seen struct {
		attempt, count int
		redelivered    bool
		at             time.Time
	}
	arrivals := make(chan seen, 10)
	consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		arrivals <- seen{m.Envelope.Attempt, m.DeliveryCount, m.Redelivered, time.Now()}
		return acemq.Retry(errors.New("boom"))
	}, acemq.ConsumerConfig{Retry: policy.HoldWaits(acemq.WaitsInQueue)})
	sent := r.send(q, order{ID: "held"})

	waits := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond}
	for i, w := range waits {
		s := r.nextSettlement()
		if s.Outcome != acemq.ConsumeRetried || s.Target != q || !s.InBroker || s.RetryDelay != w || s.Envelope.Attempt != i+1 || s.Reason != "boom" {
			t.Fatalf("settlement %d: %+v, want retried in queue %s after %v at attempt %d, the handler's reason boom", i+1, s, q, w, i+1)
		}
	}
	last := r.nextSettlement()
	if last.Outcome != acemq.ConsumeDeadLettered || last.Target != acemq.DeadLetterQueue(q) || last.Reason != "exhausted 4 attempts: boom" {
		t.Fatalf("last settlement %+v, want dead_lettered to %s, exhausted 4 attempts: boom", last, acemq.DeadLetterQueue(q))
	}
	var got []seen
	for range 4 {
		got = append(got, recv(t, arrivals))
	}
	for i, a := range got {
		if a.attempt != i+1 || a.count != i || a.redelivered != (i > 0) {
			t.Fatalf("delivery %d: attempt %d, x-delivery-count %d, redelivered %v; want attempt %d, count %d, a broker redelivery after the first", i+1, a.attempt, a.count, a.redelivered, i+1, i)
		}
		// The broker holds the message at least the wait (a lower bound
		// only: the machine may be slow).
		if i > 0 {
			if gap := got[i].at.Sub(got[i-1].at); gap < waits[i-1]*9/10 {
				t.Errorf("delivery %d came %v after the one before, under the %v the queue holds it", i+1, gap, waits[i-1])
			}
		}
	}
	m := r.pull(acemq.DeadLetterQueue(q))
	if m.Envelope.ID != sent.Envelope.ID || m.Envelope.Attempt != 4 || m.Envelope.Error != "exhausted 4 attempts: boom" {
		t.Fatalf("dlq copy: id %s attempt %d error %q", m.Envelope.ID, m.Envelope.Attempt, m.Envelope.Error)
	}
	for _, rung := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		if r.exists(acemq.RetryQueue(q, rung)) {
			t.Errorf("rung %s exists; the queue holds the waits", acemq.RetryQueue(q, rung))
		}
	}
}
