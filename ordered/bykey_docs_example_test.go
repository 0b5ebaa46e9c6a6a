package ordered_test

import (
	"context"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/ordered"
)

// The consumer docs/consuming.md shows: eight workers, one key's messages
// one at a time. ExampleByHeader runs it on memory://.
func ExampleByHeader_consumerConfig() {
	ctx := context.Background()
	conn, _ := acemq.Connect(ctx, "memory://example-bykey-config", acemq.Config{})
	defer conn.Close(ctx)
	handler := func(ctx context.Context, m *acemq.Message[string]) acemq.Decision { return acemq.Accept() }

	k, err := acemq.Consume(ctx, conn, "events", handler,
		acemq.ConsumerConfig{Concurrency: 8, KeyOrder: ordered.ByHeader("order-id")})

	if err == nil {
		_ = k.Close(ctx)
	}
}
