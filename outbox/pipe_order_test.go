package outbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// The order rule across batches (package doc, "Publishing and order"):
// Run writes batch N+1 on the same channel while batch N's confirms are
// outstanding, so when record k of batch N fails, the records after k in
// batch N and those of batch N+1 may already be on the queue ahead of k;
// nothing of batch N+2 is (it is claimed meanwhile, and written only after
// batch N was confirmed). All of them stay stored and go out again after k, so the
// last copies arrive in seq order, and no record arrives more than twice.
// The broker withholds its confirms until batch N+1 is on the wire, so
// k's failure is known only then: the test fails without the pipeline
// (record 3, of batch N+1, would not be ahead of k) and fails if the rule
// is broken (a record of batch N+2 ahead of k, a last copy out of order).
func TestFailureLetsTheNextBatchAheadAndNoFurther(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) { failureLetsTheNextBatchAhead(t, b) })
}

func failureLetsTheNextBatchAhead(t *testing.T, b backend) {
	ctx := context.Background()
	s := newStore(t, b)
	c, name := memConn(t)
	broker := memory.Lookup(name)
	top, sent := ordersWithOneUnroutable(t, s, c, 9, 1) // record 1 unroutable until bound below
	r := newRelay(t, c, s, WithBatchSize(3))
	broker.StopConfirming()
	swept := make(chan Sweep, 1)
	go func() { swept <- r.sweep(ctx, true) }()
	// Batch 0 (records 0-2, 1 unroutable) and batch 1 (3-5) are written
	// while no confirm has come: 5 routed records on the queue.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if info, _ := broker.QueueInfo("orders"); info.Messages == 5 {
			break
		}
		if time.Now().After(deadline) {
			broker.ResumeConfirming()
			info, _ := broker.QueueInfo("orders")
			t.Fatalf("with batch 0's confirms outstanding the queue holds %d messages; want batch 0's two routed records and batch 1's three", info.Messages)
		}
		time.Sleep(time.Millisecond) // polling the queue for a condition
	}
	// Batch 2 (records 6-8) is claimed while batch 0's confirms are
	// outstanding, and not written.
	for {
		p, err := s.Pending(ctx, 0)
		if err != nil {
			broker.ResumeConfirming()
			t.Fatal(err)
		}
		if len(p) == 9 && p[6].LockedBy == r.ID() && p[8].LockedBy == r.ID() {
			break
		}
		if time.Now().After(deadline) {
			broker.ResumeConfirming()
			t.Fatalf("with batch 0's confirms outstanding batch 2 was not claimed ahead: %+v", p)
		}
		time.Sleep(time.Millisecond) // polling the table for a condition
	}
	if info, _ := broker.QueueInfo("orders"); info.Messages != 5 {
		broker.ResumeConfirming()
		t.Fatalf("batch 2 claimed: the queue holds %d messages; want still 5 (batch 2 is written only after batch 0 was confirmed)", info.Messages)
	}
	broker.ResumeConfirming()
	sw := <-swept
	if sw.Published != 1 || sw.Failed != 0 || !acemq.IsUnroutable(sw.Err) {
		t.Fatalf("first sweep %+v: want record 0 published and record 1 refused (no attempt)", sw)
	}
	if r.next.recs != nil || r.later.recs != nil || r.behind != nil {
		t.Fatalf("a failed sweep kept %d records in flight, %d claimed and %d to delete", len(r.next.recs), len(r.later.recs), len(r.behind))
	}
	if p, _ := s.Pending(ctx, 0); len(p) != 8 || p[0].ID != sent[1] || p[0].Attempts != 0 {
		t.Fatalf("after the first sweep %d records pending; want the failed one and the 7 after it", len(p))
	}
	if err := c.Apply(ctx, top.Bind("orders", "shop", "k1")); err != nil {
		t.Fatal(err)
	}
	for published, sweeps := 1, 0; published < len(sent); sweeps++ {
		sw := r.sweep(ctx, true)
		if sw.Err != nil {
			t.Fatalf("sweep %+v", sw)
		}
		if sweeps > len(sent) {
			t.Fatalf("%d sweeps published only %d of %d records", sweeps, published, len(sent))
		}
		published += sw.Published
	}
	for len(r.behind) > 0 || r.next.recs != nil || r.later.recs != nil {
		if sw := r.sweep(ctx, true); sw.Err != nil {
			t.Fatalf("sweep %+v", sw)
		}
	}
	got := ids(drain(t, c, "orders"))
	t.Logf("consumer saw %v", got)
	k := slices.Index(got, sent[1])
	if k < 0 {
		t.Fatalf("record 1 never arrived: %v", got)
	}
	if want := []string{sent[0], sent[2], sent[3], sent[4], sent[5]}; !slices.Equal(got[:k], want) {
		t.Fatalf("ahead of record 1 arrived %v; want record 0, then the rest of its batch and the next batch (%v)", got[:k], want)
	}
	if !slices.Equal(lastCopies(got), sent) {
		t.Fatalf("last copies %v, want seq order %v", lastCopies(got), sent)
	}
	count := map[string]int{}
	for _, id := range got {
		count[id]++
	}
	for i, id := range sent {
		want := 1
		if i >= 2 && i <= 5 {
			want = 2
		}
		if count[id] != want {
			t.Fatalf("record %d arrived %d times, want %d", i, count[id], want)
		}
	}
}
