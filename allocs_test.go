package acemq_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
)

// The allocation promises of issue 16 on memory:// with the Bytes codec:
// at most 8 per Send, 5 per SendAll member (everything a call allocates
// counted in) and 4 per delivery (consume and ack). They are promises, so
// they are asserted; timings never are. Under
// -race sync.Pool drops items at random, so these run without it (make
// test runs them in a pass of their own).

func allocRig(t *testing.T, name string) (*acemq.Conn, *acemq.Publisher[[]byte]) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (make test runs them so)")
	}
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	return c, acemq.NewPublisher[[]byte](c, "", "q", acemq.PublisherConfig{Codec: acemq.Bytes()})
}

func TestAllocsPerSend(t *testing.T) {
	c, pub := allocRig(t, "allocs-send")
	ctx := context.Background()
	body := make([]byte, 256)
	got := testing.AllocsPerRun(500, func() {
		if _, err := pub.Send(ctx, body); err != nil {
			t.Fatal(err)
		}
	})
	if got > 8 {
		t.Fatalf("a Send allocates %.1f times, want at most 8", got)
	}
	_, _ = c.PurgeQueue(ctx, "q")
}

func TestAllocsPerSendAllMember(t *testing.T) {
	c, pub := allocRig(t, "allocs-sendall")
	ctx := context.Background()
	batch := make([][]byte, 500)
	for i := range batch {
		batch[i] = make([]byte, 256)
	}
	got := testing.AllocsPerRun(10, func() {
		if _, err := pub.SendAll(ctx, batch); err != nil {
			t.Fatal(err)
		}
		_, _ = c.PurgeQueue(ctx, "q")
	})
	// Everything the call allocates counts: the result slice, the ids (one
	// string per 64), the in-process broker's storage chunks (64 KiB of
	// bodies, 128 messages each). Members cost 4 each today.
	if per := got / float64(len(batch)); per > 5 {
		t.Fatalf("a SendAll of %d allocates %.0f times, %.3f per member, want at most 5", len(batch), got, per)
	}
	t.Logf("%.3f allocations per member", got/float64(len(batch)))
}

func TestAllocsPerDelivery(t *testing.T) {
	c, pub := allocRig(t, "allocs-consume")
	ctx := context.Background()
	const n = 2000
	batch := make([][]byte, 500)
	for i := range batch {
		batch[i] = make([]byte, 256)
	}
	for sent := 0; sent < n; sent += len(batch) {
		if _, err := pub.SendAll(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	k, err := acemq.Consume(ctx, c, "q", func(ctx context.Context, m *acemq.Message[[]byte]) acemq.Decision {
		if got.Add(1) == n {
			close(done)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: acemq.Bytes(), Prefetch: 250})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	runtime.ReadMemStats(&after)
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Starting the consumer (channel, goroutines, dead-letter declarations)
	// is counted too, spread over n deliveries.
	per := float64(after.Mallocs-before.Mallocs) / n
	if per > 4 {
		t.Fatalf("a delivery allocates %.2f times, want at most 4", per)
	}
	t.Logf("%.2f allocations per delivery", per)
}
