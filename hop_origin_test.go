package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport/memory"
)

// A set-aside copy preserves the envelope it came with (contract §1.8):
// a message from a publisher that wrote no AceMQ headers keeps no origin,
// rather than gaining the consuming service's.
func TestSetAsideCopyPreservesAnAbsentOrigin(t *testing.T) {
	ctx := context.Background()
	name := "hop-origin-" + t.Name()
	defer memory.Delete(name)
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), ClientName: "consumer-service"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.Consume(ctx, c, "q", func(ctx context.Context, m *acemq.Message[[]byte]) acemq.Decision {
		return acemq.Reject(errors.New("no"))
	}, acemq.ConsumerConfig{Codec: acemq.Bytes()}); err != nil {
		t.Fatal(err)
	}
	// A foreign publisher: no x-acemq-* headers at all.
	if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: "q", MessageID: "foreign-1", ContentType: "application/octet-stream", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, ok, err := p.Pull(ctx, "q.dlq")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if m.Envelope.ID != "foreign-1" || m.Envelope.Error == "" {
				t.Fatalf("dead-lettered %+v", m.Envelope)
			}
			if m.Envelope.Origin != "" {
				t.Fatalf("the set-aside copy gained origin %q; a hop preserves the envelope", m.Envelope.Origin)
			}
			if _, has := m.Headers[header.Origin]; has {
				t.Fatalf("the set-aside copy carries %s", header.Origin)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing reached q.dlq")
		}
		time.Sleep(5 * time.Millisecond) // no event for a queue filling
	}
}
