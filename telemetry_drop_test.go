package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// Three deliveries are held (one in the handler, two prefetched) when the
// connection drops: each is counted once in acemq.consume.lost.on.drop for
// its queue, and each is handled after the recovery.
func TestDeliveriesHeldAtAConnectionDropAreCounted(t *testing.T) {
	o := observe(t, "memory://tel-drop")
	ctx := context.Background()
	if err := o.conn.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := acemq.NewPublisher[order](o.conn, "", "q", acemq.PublisherConfig{}).Send(ctx, order{ID: "o"}); err != nil {
			t.Fatal(err)
		}
	}
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	var accepted atomic.Int64
	k, err := acemq.Consume(ctx, o.conn, "q", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		entered <- struct{}{}
		<-release
		accepted.Add(1)
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
	}
	// All three must be held (one in the handler, two prefetched) before
	// the drop; on a loaded machine the other two can still be on their
	// way to the consumer when the first handler starts.
	for held := time.Now().Add(10 * time.Second); k.InFlight() < 3; {
		if time.Now().After(held) {
			t.Fatalf("only %d deliveries reached the consumer", k.InFlight())
		}
		time.Sleep(time.Millisecond)
	}
	memory.Lookup("tel-drop").DropConnections()
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for accepted.Load() < 3 || count(t, o.collect(t), "acemq.consume.lost.on.drop", nil) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d, lost-on-drop %d; want 3 handled after the recovery and 3 counted", accepted.Load(), count(t, o.collect(t), "acemq.consume.lost.on.drop", nil))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(t, o.collect(t), "acemq.consume.lost.on.drop", nil); n != 3 {
		t.Fatalf("lost-on-drop %d, want 3", n)
	}
}
