package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency"
)

// Guard runs the handler once per message id: a second delivery of the
// same id is accepted without running it.
func ExampleGuard() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-guard", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := conn.Apply(ctx, acemq.NewTopology().Queue("emails", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		panic(err)
	}
	handled := make(chan struct{}, 2)
	sent := 0
	h := idempotency.Guard(idempotency.NewMemoryStore(), func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		sent++
		return acemq.Accept()
	})
	cons, err := acemq.Consume(ctx, conn, "emails", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		d := h(ctx, m)
		handled <- struct{}{}
		return d
	}, acemq.ConsumerConfig{Concurrency: 1})
	if err != nil {
		panic(err)
	}
	defer cons.Close(ctx)
	env := acemq.NewEnvelope()
	for range 2 {
		if _, err := conn.Publish(ctx, "", "emails", "welcome", acemq.SendOptions{Envelope: &env}); err != nil {
			panic(err)
		}
	}
	<-handled
	<-handled
	fmt.Println("deliveries: 2, e-mails sent:", sent)
	// Output: deliveries: 2, e-mails sent: 1
}
