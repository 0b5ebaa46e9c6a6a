package acemq_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// TestSendAllConfirmsArrivingWhileWriting: the broker may confirm the
// first members of a batch before the last is written, so the count of
// unanswered members touches zero mid-batch; that must not end (or
// crash) the batch. Memory only: TestSendAllSurvivesConfirmsArrivingWhile
// ItIsStillWriting says the same on both transports, on one channel.
func TestSendAllConfirmsArrivingWhileWriting(t *testing.T) {
	ctx := context.Background()
	name := "batch-" + t.Name()
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer memory.Delete(name) // a repeated run (-count) starts from an empty broker
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("batch", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[item](c, "", "batch", acemq.PublisherConfig{})
	for round := 0; round < 20; round++ {
		sents, err := pub.SendAll(ctx, make([]item, 100))
		if err != nil {
			t.Fatal(err)
		}
		if len(sents) != 100 {
			t.Fatalf("%d results for 100 payloads", len(sents))
		}
	}
	info, err := c.QueueInfo(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 2000 {
		t.Fatalf("queue holds %d, want 2000", info.Messages)
	}
}
