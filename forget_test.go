package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestForgottenQueueIsNotRedeclaredAfterRecovery(t *testing.T) {
	ctx := context.Background()
	name := "forget-" + t.Name()
	recovered := make(chan struct{}, 1)
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventRecovered {
			recovered <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	kept := acemq.NewTopology().Queue("kept", acemq.QueueOptions{Type: acemq.Classic})
	gone := acemq.NewTopology().Queue("gone", acemq.QueueOptions{Type: acemq.Classic})
	for _, tp := range []*acemq.Topology{kept, gone} {
		if err := c.Apply(ctx, tp); err != nil {
			t.Fatal(err)
		}
	}
	c.Forget(gone)
	if _, err := c.DeleteQueue(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteQueue(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	memory.Lookup(name).DropConnections()
	<-recovered
	if _, ok := memory.Lookup(name).QueueInfo("kept"); !ok {
		t.Fatal("the remembered queue was not declared again after recovery")
	}
	if _, ok := memory.Lookup(name).QueueInfo("gone"); ok {
		t.Fatal("the forgotten queue was declared again after recovery")
	}
}

func TestExactReasonIsWrittenWithoutThePrefix(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://exact-"+t.Name(), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	settled := make(chan acemq.Settlement, 1)
	c2, err := acemq.Connect(ctx, "memory://exact-"+t.Name(), acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) { settled <- s }})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	_, err = acemq.Consume(ctx, c2, "q", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		return acemq.Reject(acemq.Fatal(acemq.ExactReason(errors.New("acemq: a fixed contract sentence"))))
	}, acemq.ConsumerConfig{Codec: acemq.Text()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "", "q", "x", acemq.SendOptions{Codec: acemq.Text()}); err != nil {
		t.Fatal(err)
	}
	if s := <-settled; s.Reason != "acemq: a fixed contract sentence" {
		t.Fatalf("reason %q", s.Reason)
	}
}
