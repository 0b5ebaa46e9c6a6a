package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/dbtest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// With polling every hour, a committed record is published within
// moments: Add's pg_notify wakes the LISTENing relay.
func TestListenWakesTheRelayOnCommit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{Name: "postgres", Open: dbtest.Postgres})
	c, _ := memConn(t, "orders")
	sweeps := make(chan Sweep, 16)
	r := newRelay(t, c, s, WithInterval(time.Hour), WithObserver(func(sw Sweep) { sweeps <- sw }))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never LISTENed")
	}
	// Drain the start-up sweeps.
	for len(sweeps) > 0 {
		<-sweeps
	}
	start := time.Now()
	id := add(t, s, c, "", "orders", order{"now", 1})[0]
	for {
		select {
		case sw := <-sweeps:
			if sw.Published == 0 {
				continue
			}
			lat := time.Since(start)
			if lat > 2*time.Second {
				t.Fatalf("published after %v", lat)
			}
			t.Logf("commit → confirm and delete in %v", lat)
		case <-time.After(5 * time.Second):
			t.Fatal("the record was not published without polling")
		}
		break
	}
	if got := ids(drain(t, c, "orders")); !slices.Equal(got, []string{id}) {
		t.Fatalf("published %v", got)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := r.Run(ctx); err != ErrRunning {
		t.Fatalf("second Run: %v", err)
	}
}

func TestNackSpendsAnAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, name := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1})
		memory.Lookup(name).NackNext(1)
		r := newRelay(t, c, s)
		if sw := r.SweepOnce(ctx); sw.Failed != 1 || !acemq.IsNacked(sw.Err) {
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
