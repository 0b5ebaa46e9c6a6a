package outbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/dbtest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// The claim is decided by UPDATE row count after an advisory lock: many
// relays claiming at once, again and again, never both get records.
func TestConcurrentClaimsOnPostgresNeverShareTheOutbox(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{"postgres", dbtest.Postgres})
	c, _ := memConn(t)
	for i := range 200 {
		add(t, s, c, "", "orders", order{fmt.Sprint(i), i})
	}
	for round := range 30 {
		var wg sync.WaitGroup
		winners := make(chan string, 8)
		for r := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs, err := s.claim(ctx, fmt.Sprintf("relay-%d-%d", round, r), 100, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(recs) > 0 {
					winners <- fmt.Sprintf("relay-%d-%d", round, r)
				}
			}()
		}
		wg.Wait()
		close(winners)
		var won []string
		for w := range winners {
			won = append(won, w)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d relays claimed at once: %v", round, len(won), won)
		}
		if err := s.unlock(ctx, won[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// Two relays running against one table publish every record once, in
// order.
func TestTwoRelaysOnPostgresPublishEveryRecordOnceInOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{"postgres", dbtest.Postgres})
	c1, name := memConn(t, "orders")
	c2, err := acemq.Connect(ctx, "memory://"+name, acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	const n = 350
	var sent []string
	for i := range n {
		sent = append(sent, add(t, s, c1, "", "orders", order{fmt.Sprint(i), i})...)
	}
	sweeps := make(chan Sweep, 1024)
	observe := WithObserver(func(sw Sweep) {
		select {
		case sweeps <- sw:
		default:
		}
	})
	r1 := newRelay(t, c1, s, WithRelayID("r1"), WithInterval(5*time.Millisecond), observe)
	r2 := newRelay(t, c2, s, WithRelayID("r2"), WithInterval(5*time.Millisecond), observe)
	var wg sync.WaitGroup
	for _, r := range []*Relay{r1, r2} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	published := 0
	deadline := time.After(30 * time.Second)
	for published < n {
		select {
		case sw := <-sweeps:
			if sw.Err != nil {
				t.Errorf("sweep error: %v", sw.Err)
			}
			published += sw.Published
		case <-deadline:
			t.Fatalf("only %d of %d published", published, n)
		}
	}
	for _, r := range []*Relay{r1, r2} {
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if published != n {
		t.Fatalf("relays reported %d publishes for %d records", published, n)
	}
	got := ids(drain(t, c1, "orders"))
	if !slices.Equal(got, sent) {
		t.Fatalf("queue holds %d messages; want the %d records once each, in order", len(got), n)
	}
	if p, _ := s.Pending(ctx, 0); len(p) != 0 {
		t.Fatalf("%d records left", len(p))
	}
}

// With polling every hour, a committed record is published within
// moments: Add's pg_notify wakes the LISTENing relay.
func TestListenWakesTheRelayOnCommit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{"postgres", dbtest.Postgres})
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
