package acemq_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acemq-go/acemq"
)

// The zero Config works; a field set overrides its default, and
// Conn.Config reports the effective settings with the defaults filled in.
// A consumer's ConsumerConfig overrides the Conn's for that consumer.
func ExampleConfig() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-config", acemq.Config{
		ClientName: "billing",
		Prefetch:   50,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	cfg := c.Config()
	fmt.Println(cfg.ClientName, cfg.Prefetch, cfg.MaxOutstandingPublishes, cfg.ConfirmTimeout, cfg.DrainTimeout, cfg.Codec.Name())

	_, err = acemq.Connect(ctx, "memory://example-config", acemq.Config{Prefetch: -1})
	fmt.Println(err)
	// Output:
	// billing 50 1000 10s 20s json
	// acemq: option Config.Prefetch: prefetch -1 is below 1; unlimited prefetch is refused, use a bound such as 20
}
