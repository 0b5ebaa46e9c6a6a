// Command pipeline shows a declared pipeline: orders go through validate,
// price and ship, each step its own queue and consumers; an order with
// nothing in it ends early at validate. It runs on the in-process broker;
// -url runs it against RabbitMQ. It exits 0 only if every order finished
// where it should (completed at ship, or ended early at validate) and
// ship saw the tax price added.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/pipeline"
)

type order struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

type priced struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	url := flag.String("url", "memory://example-pipeline", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	outcomes := map[string]string{} // route id → step/outcome
	finished := make(chan struct{}, 16)
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnEvent: func(e acemq.Event) {
		if e.Kind == pipeline.EventRunFinished {
			mu.Lock()
			outcomes[e.Fields["route_id"]] = e.Fields["step"] + "/" + e.Fields["outcome"]
			mu.Unlock()
			finished <- struct{}{}
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	shipped := map[string]int{}
	p, err := pipeline.New(fmt.Sprintf("example-orders-%d", time.Now().UnixNano()),
		pipeline.NewStep("validate", func(_ context.Context, m *acemq.Message[order]) (order, bool, error) {
			return m.Payload, m.Payload.Items > 0, nil // an empty order ends here
		}),
		pipeline.NewStep("price", func(_ context.Context, m *acemq.Message[order]) (priced, bool, error) {
			return priced{ID: m.Payload.ID, Cents: m.Payload.Items * 250}, true, nil
		}, pipeline.Consumers(2)),
		pipeline.NewStep("ship", func(_ context.Context, m *acemq.Message[priced]) (struct{}, bool, error) {
			mu.Lock()
			shipped[m.Payload.ID] = m.Payload.Cents
			mu.Unlock()
			return struct{}{}, true, nil
		}),
	)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, p.Topology()); err != nil {
		return err
	}
	defer func() {
		for _, s := range p.Steps() {
			q := p.Queue(s)
			for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
				_, _ = c.DeleteQueue(context.Background(), name)
			}
		}
	}()
	run, err := p.Start(ctx, c)
	if err != nil {
		return err
	}
	defer run.Close(context.Background())

	want := map[string]string{}
	for _, o := range []order{{"o-1", 2}, {"o-2", 0}, {"o-3", 4}} {
		sent, err := p.Send(ctx, c, o, acemq.SendOptions{})
		if err != nil {
			return err
		}
		want[sent.Envelope.RouteID] = "ship/completed"
		if o.Items == 0 {
			want[sent.Envelope.RouteID] = "validate/ended_early"
		}
	}
	for range want {
		select {
		case <-finished:
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d runs finished", len(outcomes), len(want))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, w := range want {
		if outcomes[id] != w {
			return fmt.Errorf("run %s finished %q, want %q", id, outcomes[id], w)
		}
	}
	fmt.Printf("3 runs: 2 completed, 1 ended early; shipped %v\n", shipped)
	if len(shipped) != 2 || shipped["o-1"] != 500 || shipped["o-3"] != 1000 {
		return fmt.Errorf("shipped %v, want o-1 at 500 and o-3 at 1000", shipped)
	}
	return nil
}
