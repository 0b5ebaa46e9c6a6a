// Command topology is the fourth journey: topology as data. A service
// describes the exchanges, queues and bindings it needs as a value;
// Validate refuses a mistake before anything reaches the broker (with a
// sentence that says what to change); Plan compares the description with
// the broker without changing it; Apply declares it, and the Conn declares
// it again after every recovery. It runs with nothing installed
// (memory://) or against RabbitMQ:
//
//	go run ./examples/topology
//	go run ./examples/topology -url amqp://guest:guest@127.0.0.1:5672/
//
// (or set ACEMQ_URL). It exits 0 only if the invalid topology was refused,
// the plan said "would create" before Apply and "matches" after, and a
// message published to the exchange reached the bound queue.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
)

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://topology"), "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	suffix := time.Now().Format("150405.000000")
	events, billing, audit := "example.events."+suffix, "example.billing."+suffix, "example.audit."+suffix

	// A mistake: a binding to a queue nobody declares. Validate (which Plan
	// and Apply also run) refuses it before anything is sent.
	bad := acemq.NewTopology().Exchange(events, acemq.Topic, acemq.ExchangeOptions{}).Bind("example.nowhere", events, "#")
	if err := bad.Validate(); err == nil {
		return errors.New("a binding to an undeclared queue was accepted")
	} else {
		fmt.Printf("refused before reaching the broker: %v\n", err)
	}

	// The service's real topology: a topic exchange, a quorum queue with its
	// dead-letter queues and retry ladder, and a classic audit queue.
	topo := acemq.NewTopology().
		Exchange(events, acemq.Topic, acemq.ExchangeOptions{}).
		Queue(billing, acemq.QueueOptions{}).DeadLetters(billing).Retries(billing, acemq.Fixed(3, time.Minute)).
		Queue(audit, acemq.QueueOptions{Type: acemq.Classic}).
		Bind(billing, events, "order.*").
		Bind(audit, events, "#")
	fmt.Print("the topology:\n", indent(topo.Describe()))
	defer func() {
		for _, d := range topo.Declarations() {
			if d.Kind == acemq.DeclQueue {
				_, _ = c.DeleteQueue(context.Background(), d.Queue.Name)
			}
		}
	}()

	before, err := c.Plan(ctx, topo)
	if err != nil {
		return err
	}
	fmt.Print("plan before Apply:\n", indent(before.String()))
	if err := c.Apply(ctx, topo); err != nil {
		return err
	}
	after, err := c.Plan(ctx, topo)
	if err != nil {
		return err
	}
	fmt.Print("plan after Apply:\n", indent(after.String()))
	for i, it := range after.Items {
		if it.Declaration.Kind == acemq.DeclBinding {
			continue // the broker cannot be asked about bindings
		}
		// acemq.dlx and acemq.retry may already exist (every service shares them).
		shared := !strings.Contains(it.Declaration.String(), suffix)
		if (before.Items[i].Status != acemq.WouldCreate && !shared) || it.Status != acemq.Matches {
			return fmt.Errorf("%v: planned %q before Apply and %q after, want %q then %q",
				it.Declaration, before.Items[i].Status, it.Status, acemq.WouldCreate, acemq.Matches)
		}
	}

	// The bindings route: one publish reaches both queues.
	if _, err := acemq.NewPublisher[string](c, events, "order.placed", acemq.PublisherConfig{Mandatory: true}).Send(ctx, "o-1"); err != nil {
		return err
	}
	for _, q := range []string{billing, audit} {
		for {
			info, err := c.QueueInfo(ctx, q)
			if err != nil {
				return err
			}
			if info.Messages == 1 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s holds %d messages, want 1", q, info.Messages)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	fmt.Println("order.placed reached both bound queues")
	fmt.Println("OK")
	return nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
