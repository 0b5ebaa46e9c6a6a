package outbox

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq/transport/memory"
)

// A nack is the broker refusing to take the message for a reason of its
// own (a full queue that rejects publishes): the relay spends no attempt,
// notes why and is held there until the next sweep gets it through.
func TestNackHoldsTheRelayWithoutSpendingAnAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, name := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1})
		memory.Lookup(name).NackNext(1)
		r := newRelay(t, c, s)
		if sw := r.SweepOnce(ctx); sw.Failed != 0 || !isNacked(sw.Err) || r.Held() == nil {
			t.Fatalf("sweep %+v, held %v", sw, r.Held())
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 1 || p[0].Attempts != 0 || p[0].LastError == "" {
			t.Fatalf("record %+v", p)
		}
		if sw := r.SweepOnce(ctx); sw.Published != 1 || r.Held() != nil {
			t.Fatalf("second sweep %+v, held %v", sw, r.Held())
		}
	})
}
