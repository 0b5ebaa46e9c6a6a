package outbox

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq/transport/memory"
)

func TestNackSpendsAnAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, name := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1})
		memory.Lookup(name).NackNext(1)
		r := newRelay(t, c, s)
		if sw := r.SweepOnce(ctx); sw.Failed != 1 || !isNacked(sw.Err) {
			t.Fatalf("sweep %+v", sw)
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 1 || p[0].Attempts != 1 {
			t.Fatalf("record %+v", p)
		}
		if sw := r.SweepOnce(ctx); sw.Published != 1 {
			t.Fatalf("second sweep %+v", sw)
		}
	})
}
