package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/pipeline"
)

// An order is validated, then priced; the last step reports the run.
func ExampleNew() {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://example-pipeline", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	done := make(chan string, 1)
	p, err := pipeline.New("orders",
		pipeline.NewStep("validate", func(ctx context.Context, m *acemq.Message[string]) (string, bool, error) {
			return strings.ToUpper(m.Payload), true, nil
		}),
		pipeline.NewStep("price", func(ctx context.Context, m *acemq.Message[string]) (int, bool, error) {
			done <- fmt.Sprintf("%s priced at step %d of %v", m.Payload, m.Envelope.RoutePosition, m.Envelope.Route)
			return 42, true, nil
		}),
	)
	if err != nil {
		panic(err)
	}
	if err := c.Apply(ctx, p.Topology()); err != nil {
		panic(err)
	}
	run, err := p.Start(ctx, c)
	if err != nil {
		panic(err)
	}
	defer run.Close(ctx)
	if _, err := p.Send(ctx, c, "order o-1", acemq.SendOptions{}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output:
	// ORDER O-1 priced at step 1 of [validate price]
}

// Steps whose types do not chain are refused when the pipeline is built.
func ExampleNew_typeMismatch() {
	_, err := pipeline.New("orders",
		pipeline.NewStep("validate", func(ctx context.Context, m *acemq.Message[string]) (string, bool, error) { return m.Payload, true, nil }),
		pipeline.NewStep("price", func(ctx context.Context, m *acemq.Message[int]) (int, bool, error) { return 0, true, nil }),
	)
	fmt.Println(err)
	// Output:
	// acemq: pipeline "orders" cannot chain step "validate" into step "price": "validate" produces string but "price" takes int; make the types match
}
