package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

type order struct {
	ID string `json:"id"`
}

func TestSmokePublishConsumeRetryDeadLetter(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://smoke-"+t.Name(), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	got := make(chan acemq.Envelope, 10)
	cons, err := acemq.Consume(ctx, c, "orders", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		got <- m.Envelope
		if m.Payload.ID == "bad" {
			return acemq.Retry(errors.New("boom"))
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.Fixed(3, 10*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[order](c, "", "orders", acemq.PublisherConfig{})
	sent, err := pub.Send(ctx, order{ID: "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if e := <-got; e.ID != sent.Envelope.ID || e.Attempt != 1 {
		t.Fatalf("got %+v", e)
	}
	if _, err := pub.Send(ctx, order{ID: "bad"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if e := <-got; e.Attempt != i {
			t.Fatalf("attempt %d, want %d", e.Attempt, i)
		}
	}
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, ok, err := p.Pull(ctx, "orders.dlq")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if m.Envelope.Error != "exhausted 3 attempts: boom" {
				t.Fatalf("error %q", m.Envelope.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing in orders.dlq")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
