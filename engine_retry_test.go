package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// arrival is one handler call: what it saw and when.
type arrival struct {
	m  *acemq.Message[order]
	at time.Time
}

// failing starts a consumer on q whose handler always retries with "boom".
func failing(r *rig, q string, opts ...acemq.ConsumerConfig) <-chan arrival {
	seen := make(chan arrival, 100)
	consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		seen <- arrival{m: m, at: time.Now()}
		return acemq.Retry(errors.New("boom"))
	}, opts...)
	return seen
}

// The retry tests run on memory:// and RabbitMQ alike (onEveryRig): the
// schedule, the rungs and the way home are the engine's and the
// topology's, not one broker's.

func TestRetryInConsumerRepublishesAttemptPlusOneOnTheSchedule(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		policy := acemq.Exponential(3, 40*time.Millisecond, 0) // schedule 40ms, 80ms; jitter 0.2
		seen := failing(r, q, acemq.ConsumerConfig{Retry: policy})
		sent := r.send(q, order{ID: "r"})

		wantDelays := []time.Duration{40 * time.Millisecond, 80 * time.Millisecond}
		for i, d := range wantDelays {
			s := r.nextSettlement()
			if s.Outcome != acemq.ConsumeRetried || s.Target != q || s.InBroker || s.RetryDelay != d || s.Envelope.Attempt != i+1 {
				t.Fatalf("settlement %d: %+v, want retried to q in the consumer after %s at attempt %d", i+1, s, d, i+1)
			}
		}
		last := r.nextSettlement()
		if last.Outcome != acemq.ConsumeDeadLettered || last.Target != q+".dlq" || last.Reason != "exhausted 3 attempts: boom" {
			t.Fatalf("last settlement %+v, want dead_lettered to q.dlq, exhausted 3 attempts: boom", last)
		}
		var arrivals []arrival
		for range 3 {
			arrivals = append(arrivals, recv(t, seen))
		}
		for i, a := range arrivals {
			if a.m.Envelope.Attempt != i+1 || a.m.Envelope.ID != sent.Envelope.ID {
				t.Fatalf("delivery %d: id %s attempt %d, want %s attempt %d", i+1, a.m.Envelope.ID, a.m.Envelope.Attempt, sent.Envelope.ID, i+1)
			}
			if a.m.Redelivered {
				t.Fatalf("delivery %d is a broker redelivery; a retry must be a republish", i+1)
			}
			if !a.m.Envelope.FirstSeen.Equal(sent.Envelope.FirstSeen) {
				t.Fatalf("delivery %d first-seen %v, want %v kept", i+1, a.m.Envelope.FirstSeen, sent.Envelope.FirstSeen)
			}
		}
		// Jittered waits land in [0.8, 1.2] × delay; only the lower bound is
		// safe to assert on a loaded machine.
		for i, d := range wantDelays {
			if gap := arrivals[i+1].at.Sub(arrivals[i].at); gap < d*8/10 {
				t.Errorf("wait before attempt %d was %s, below 0.8 × %s", i+2, gap, d)
			}
		}
		m := r.pull(q + ".dlq")
		if m.Envelope.Error != "exhausted 3 attempts: boom" || m.Envelope.Attempt != 3 {
			t.Fatalf("dlq copy: attempt %d error %q", m.Envelope.Attempt, m.Envelope.Error)
		}
		r.noMoreSettlements(50 * time.Millisecond)
		r.waitReady(q, 0)
	})
}

func TestRetryWithNoRetryDeadLettersAfterOneAttempt(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		failing(r, q, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
		sent := r.send(q, order{ID: "n"})
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeDeadLettered, q+".dlq", "exhausted 1 attempt: boom")
		if m := r.pull(q + ".dlq"); m.Envelope.Error != "exhausted 1 attempt: boom" {
			t.Fatalf("x-acemq-error = %q", m.Envelope.Error)
		}
	})
}

func TestRetryBeyondTheAgeLimitDeadLettersWithAgeReason(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		failing(r, q, acemq.ConsumerConfig{Retry: acemq.Exponential(5, time.Millisecond, 0).GiveUpAfter(2 * time.Minute)})
		env := acemq.NewEnvelope()
		env.FirstSeen = time.Now().Add(-3 * time.Minute).Truncate(time.Millisecond)
		sent := r.send(q, order{ID: "old"}, acemq.SendOptions{Envelope: &env})
		want := "exceeded the maximum message age of 2m0s: boom"
		assertOne(t, r, sent.Envelope.ID, acemq.ConsumeDeadLettered, q+".dlq", want)
		if m := r.pull(q + ".dlq"); m.Envelope.Error != want || m.Envelope.Attempt != 1 {
			t.Fatalf("dlq copy: attempt %d error %q", m.Envelope.Attempt, m.Envelope.Error)
		}
	})
}

func TestConsumerDeclaresTheDeadLetterHalfAtStart(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		consume(r, q, func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
		for _, half := range []string{q + ".dlq", q + ".parked"} {
			if !r.exists(half) {
				t.Errorf("%s does not exist after Consume returned", half)
			}
		}
		if r.exists(q+".retry.0s") || r.exists(q+".retry.1s") {
			t.Error("a rung was declared for a policy that never waits in the broker")
		}
	})
}

func TestRetryInBrokerGoesThroughTheRungAndHomeViaRetryExchange(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		policy := acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)
		seen := failing(r, q, acemq.ConsumerConfig{Retry: policy})
		if !r.exists(q + ".retry.1s") {
			t.Fatalf("%s.retry.1s does not exist after Consume returned", q)
		}
		r.send(q, order{ID: "b"})
		s := r.nextSettlement()
		if s.Outcome != acemq.ConsumeRetried || s.Target != q+".retry.1s" || !s.InBroker || s.RetryDelay != time.Second {
			t.Fatalf("settlement %+v, want retried to q.retry.1s in the broker after 1s", s)
		}
		first, second := recv(t, seen), recv(t, seen)
		if first.m.Envelope.Attempt != 1 || second.m.Envelope.Attempt != 2 {
			t.Fatalf("attempts %d, %d; want 1, 2", first.m.Envelope.Attempt, second.m.Envelope.Attempt)
		}
		if second.m.Exchange != acemq.RetryExchange || second.m.Redelivered {
			t.Fatalf("the retried copy came home through exchange %q (redelivered %v), want %q", second.m.Exchange, second.m.Redelivered, acemq.RetryExchange)
		}
		if gap := second.at.Sub(first.at); gap < time.Second {
			t.Errorf("the rung held the message %s, under its 1s TTL", gap)
		}
		last := r.nextSettlement()
		if last.Outcome != acemq.ConsumeDeadLettered || last.Reason != "exhausted 2 attempts: boom" {
			t.Fatalf("last settlement %+v", last)
		}
		m := r.pull(q + ".dlq")
		if m.Envelope.Attempt != 2 {
			t.Fatalf("dlq copy attempt %d", m.Envelope.Attempt)
		}
		// The rung's broker dead-lettering stamped x-death on the way home;
		// the set-aside copy must not carry it.
		if _, ok := m.Headers["x-death"]; ok {
			t.Fatal("the dlq copy carries the broker's x-death header")
		}
		// A second consumer with the same policy declares the same rung
		// again: its arguments are the same, so the broker does not refuse it.
		k2, err := acemq.Consume(context.Background(), r.c, q, func(context.Context, *acemq.Message[order]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Retry: policy})
		if err != nil {
			t.Fatalf("a second consumer with the same policy failed: %v", err)
		}
		if err := k2.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMissingRungFallsBackToAConsumerWait(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q, func(tp *acemq.Topology) {
			tp.Queue(q+".dlq", acemq.QueueOptions{Type: acemq.Classic}).Queue(q+".parked", acemq.QueueOptions{Type: acemq.Classic})
		})
		policy := acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)
		seen := failing(r, q, acemq.ConsumerConfig{Retry: policy, NoDeadLetterDeclaration: true})
		if r.exists(q + ".retry.1s") {
			t.Fatal("the rung was declared despite ConsumerConfig.NoDeadLetterDeclaration")
		}
		r.send(q, order{ID: "m"})
		f := r.nextFallback()
		if f.Kind != "rung_missing" || f.Queue != q || f.Target != q+".retry.1s" || !acemq.IsUnroutable(f.Err) {
			t.Fatalf("fallback %+v, want rung_missing for q.retry.1s with an unroutable error", f)
		}
		first, second := recv(t, seen), recv(t, seen)
		if first.m.Envelope.Attempt != 1 || second.m.Envelope.Attempt != 2 || second.m.Redelivered {
			t.Fatalf("attempts %d, %d (redelivered %v); want 1, 2 republished", first.m.Envelope.Attempt, second.m.Envelope.Attempt, second.m.Redelivered)
		}
		if gap := second.at.Sub(first.at); gap < time.Second {
			t.Errorf("the consumer wait was %s, want the fixed 1s", gap)
		}
		if s := r.nextSettlement(); s.Outcome != acemq.ConsumeRetried {
			t.Fatalf("first settlement %q, want retried", s.Outcome)
		}
		if s := r.nextSettlement(); s.Outcome != acemq.ConsumeDeadLettered || s.Reason != "exhausted 2 attempts: boom" {
			t.Fatalf("last settlement %+v", s)
		}
		r.pull(q + ".dlq")
	})
}
