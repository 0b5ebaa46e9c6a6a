package idempotency

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
)

// TestADuplicateWaitsInProgressUntilTheCrashedClaimsLeaseRunsOut: a
// consumer claimed a message's key and crashed; its redelivery (or a
// duplicate) meets the live claim and is put back every 5 s, unchanged,
// until the 5-minute lease runs out; then it takes the claim over and
// runs once. Five minutes of in-progress holds, in virtual time.
func TestADuplicateWaitsInProgressUntilTheCrashedClaimsLeaseRunsOut(t *testing.T) {
	topo := acemq.NewTopology().Queue("payments", acemq.QueueOptions{})
	acemqtest.Run(t, acemqtest.Config{Topology: topo}, func(t *testing.T, h *acemqtest.Harness) {
		store := NewMemoryStore()
		env := acemq.NewEnvelope()
		crashed, err := store.Claim(t.Context(), env.ID, DefaultLease)
		if err != nil || crashed.Outcome != Claimed {
			t.Fatalf("the crashed consumer's claim: %+v, %v", crashed, err)
		}
		claimedAt := h.Now()
		var runs atomic.Int64
		_, err = acemq.Consume(t.Context(), h.Conn(), "payments", Guard(store, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
			runs.Add(1)
			return acemq.Accept()
		}), acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acemq.NewPublisher[string](h.Conn(), "", "payments", acemq.PublisherConfig{}).SendWith(t.Context(), "charge 12.50", acemq.SendOptions{Envelope: &env}); err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the handler ran %d times, want once, after the lease", n)
		}
		held := h.Expect(t, acemqtest.InProgress, int(DefaultLease/DefaultInProgressDelay), acemqtest.ID(env.ID))
		for _, r := range held {
			if r.Envelope.Attempt != 1 || r.RetryDelay != DefaultInProgressDelay {
				t.Fatalf("an in-progress hold at attempt %d for %s, want attempt 1 for %s", r.Envelope.Attempt, r.RetryDelay, DefaultInProgressDelay)
			}
		}
		ran := h.Expect(t, acemqtest.Acked, 1, acemqtest.ID(env.ID))
		if after := ran[0].At.Sub(claimedAt); after < DefaultLease || after > DefaultLease+DefaultInProgressDelay {
			t.Fatalf("it ran %s after the crashed claim, want when its %s lease runs out", after, DefaultLease)
		}
	})
}
