package acemq_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// TestWaitForRecoveryCoversAPublishThatMeetsTheLossFirst: with
// Config.WaitForRecovery, a Send made the moment the connection drops, before
// the Conn has noticed (its write finds the connection gone, nothing
// written), waits for the recovery like one made after, instead of being
// refused as paused.
func TestWaitForRecoveryCoversAPublishThatMeetsTheLossFirst(t *testing.T) {
	name := fmt.Sprintf("wait-race-%d", time.Now().UnixNano())
	t.Cleanup(func() { memory.Delete(name) })
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), WaitForRecovery: true, RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[int](c, "", "q", acemq.PublisherConfig{})
	for i := range 50 {
		memory.Lookup(name).DropConnections()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := pub.Send(sctx, i)
		cancel()
		if err != nil {
			t.Fatalf("drop %d: a Send right after the drop with Config.WaitForRecovery: %v", i, err)
		}
	}
}

// TestWaitForRecoveryCoversASendAllThatMeetsTheLossFirst: SendAll takes
// Send's path, so with Config.WaitForRecovery every member of a batch written
// the moment the connection drops, before the Conn noticed, waits for the
// recovery instead of being refused as paused.
func TestWaitForRecoveryCoversASendAllThatMeetsTheLossFirst(t *testing.T) {
	name := fmt.Sprintf("wait-race-all-%d", time.Now().UnixNano())
	t.Cleanup(func() { memory.Delete(name) })
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), WaitForRecovery: true, RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[int](c, "", "q", acemq.PublisherConfig{})
	for i := range 50 {
		memory.Lookup(name).DropConnections()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sents, err := pub.SendAll(sctx, []int{3 * i, 3*i + 1, 3*i + 2})
		cancel()
		if err != nil {
			t.Fatalf("drop %d: a SendAll right after the drop with Config.WaitForRecovery: %v", i, err)
		}
		if len(sents) != 3 {
			t.Fatalf("drop %d: %d results for 3 payloads", i, len(sents))
		}
	}
}
