package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
)

type demoOrder struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func newDemo() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a narrated order flow: publish, consume, retry, dead-letter",
		Example: `  acemq demo
  acemq demo --url amqp://guest:guest@localhost:5672/`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			return runDemo(ctx, cmd.OutOrStdout(), url)
		},
	}
	cmd.Flags().StringVar(&url, "url", "memory://demo", "broker URL (memory://name or amqp://…)")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, url string) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	c, err := acemq.Connect(ctx, url, acemq.WithClientName("acemq-demo"), acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		return fmt.Errorf("cannot reach the broker at %s (%v); check the URL, or run without --url to use the in-process broker", url, err)
	}
	defer c.Close(context.Background())
	queue := fmt.Sprintf("demo.orders.%d", time.Now().UnixNano()%1_000_000)
	topo := acemq.NewTopology().
		Exchange("demo.orders", acemq.Topic).
		Queue(queue).DeadLetters(queue).
		Bind(queue, "demo.orders", "order.*")
	if err := c.Apply(ctx, topo); err != nil {
		return err
	}
	say("declared exchange demo.orders and queue %s (quorum, with %s and %s)", queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue))

	var mu sync.Mutex
	attempts := map[string]int{}
	var consumed, acked, retried, deadLettered atomic.Int64
	done := make(chan struct{}, 8)
	hook := func(s acemq.Settlement) {
		switch s.Outcome {
		case acemq.ConsumeRetried:
			retried.Add(1)
		case acemq.ConsumeRejected, acemq.ConsumeDeadLettered, acemq.ConsumeParked:
			deadLettered.Add(1)
			done <- struct{}{}
		case acemq.ConsumeAcked:
			acked.Add(1)
			done <- struct{}{}
		}
	}
	c2, err := acemq.Connect(ctx, url, acemq.WithClientName("acemq-demo-consumer"), acemq.WithLogger(acemq.DiscardLogger()), acemq.WithSettlementHook(hook))
	if err != nil {
		return err
	}
	defer c2.Close(context.Background())
	policy := acemq.Exponential(4, 100*time.Millisecond, time.Second)
	cons, err := acemq.Consume(ctx, c2, queue, func(ctx context.Context, m *acemq.Message[demoOrder]) acemq.Decision {
		consumed.Add(1)
		mu.Lock()
		attempts[m.Payload.ID]++
		n := attempts[m.Payload.ID]
		mu.Unlock()
		switch m.Payload.ID {
		case "o-flaky":
			if n < 3 {
				say("inventory for %s is not ready (attempt %d): retry", m.Payload.ID, m.Envelope.Attempt)
				return acemq.Retry(errors.New("inventory service timed out"))
			}
			say("inventory for %s reserved on attempt %d", m.Payload.ID, m.Envelope.Attempt)
			return acemq.Accept()
		case "o-poison":
			say("order %s has a negative total: reject", m.Payload.ID)
			return acemq.Reject(fmt.Errorf("order %s has a negative total (%d cents)", m.Payload.ID, m.Payload.Cents))
		}
		say("order %s handled (attempt %d)", m.Payload.ID, m.Envelope.Attempt)
		return acemq.Accept()
	}, acemq.ConsumerRetry(policy))
	if err != nil {
		return err
	}
	say("consumer started with retry policy %s", policy)

	pub := acemq.NewPublisher[demoOrder](c, "demo.orders", "order.placed", acemq.PublisherMandatory())
	orders := []demoOrder{{"o-1", 4250}, {"o-flaky", 1999}, {"o-poison", -5}}
	sents, err := pub.SendAll(ctx, orders)
	if err != nil {
		return err
	}
	for _, s := range sents {
		say("published %s (confirmed, routed)", s.Envelope.ID)
	}
	for i := 0; i < len(orders); i++ {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("the flow did not finish in time: %w", ctx.Err())
		}
	}
	if err := cons.Close(ctx); err != nil {
		return err
	}
	p, err := c.NewPuller(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	var dlq int
	deadline := time.Now().Add(5 * time.Second)
	for dlq == 0 && time.Now().Before(deadline) {
		m, ok, err := p.Pull(ctx, acemq.DeadLetterQueue(queue))
		if err != nil {
			return err
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		dlq++
		say("%s holds %s: %q", acemq.DeadLetterQueue(queue), m.Envelope.ID, m.Envelope.Error)
		_ = m.Ack()
	}
	st := c.Stats()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\npublished\tconfirmed\tconsumed\tretried\tdead-lettered\tlost")
	// Every confirmed order must have ended somewhere: handled or dead-lettered.
	lost := st.Confirmed - acked.Load() - deadLettered.Load()
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", st.Published, st.Confirmed, consumed.Load(), retried.Load(), deadLettered.Load(), lost)
	tw.Flush()
	want := st.Published == 3 && st.Confirmed == 3 && consumed.Load() == 5 && retried.Load() == 2 && deadLettered.Load() == 1 && dlq == 1 && lost == 0
	if !want {
		return errors.New("the numbers are not what the flow implies (see the table); something was lost or repeated")
	}
	fmt.Fprintf(out, "every number is what the flow implies: lost = 0 (%.2fs)\n", time.Since(start).Seconds())
	return nil
}
