package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
)

// tailLine is one message as tail prints it (one JSON object per line).
type tailLine struct {
	ID            string `json:"id"`
	Type          string `json:"type"`
	CorrelationID string `json:"correlationId"`
	Attempt       int    `json:"attempt"`
	Error         string `json:"error,omitempty"`
	RoutingKey    string `json:"routingKey"`
	ContentType   string `json:"contentType"`
	Body          string `json:"body"`
	Settled       string `json:"settled"` // acked or held (returned on exit)
}

func newTail() *cobra.Command {
	var u string
	var ack, requeue bool
	var n int
	var dur time.Duration
	cmd := &cobra.Command{
		Use:   "tail QUEUE",
		Short: "Take messages from QUEUE and print their envelopes, one JSON line each",
		Long: "Take messages from QUEUE and print each envelope as one JSON line. With --requeue (the default) nothing is removed: " +
			"messages are held until tail exits and then returned to the queue in order. With --ack each printed message is removed.",
		Example: `  acemq tail orders.new -n 10
  acemq tail orders.new.dlq --for 30s
  acemq tail orders.new --ack -n 1`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ack && requeue {
				return fmt.Errorf("--ack and --requeue contradict each other; pick one")
			}
			if n < 0 {
				return fmt.Errorf("-n must be 0 (no limit) or more, got %d; pass -n 0 or more", n)
			}
			q := args[0]
			ctx, cancel := context.WithCancel(cmd.Context())
			if dur > 0 {
				ctx, cancel = context.WithTimeout(cmd.Context(), dur)
			}
			defer cancel()
			c, err := connect(ctx, u, "acemq-tail")
			if err != nil {
				return err
			}
			defer closeConn(c)
			if _, err := requireQueue(ctx, c, q); err != nil {
				return err
			}
			p, err := c.NewPuller(ctx)
			if err != nil {
				return fmt.Errorf("cannot open a channel to read %q (%s); check the connection and retry", q, sentence(err))
			}
			var held []*acemq.Pulled
			defer func() {
				for _, m := range held {
					_ = m.Nack(true)
				}
				_ = p.Close()
			}()
			out := cmd.OutOrStdout()
			poll := time.NewTicker(50 * time.Millisecond)
			defer poll.Stop()
			for got := 0; n == 0 || got < n; {
				m, ok, err := p.Pull(ctx, q)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("cannot read %q (%s); check the connection and retry", q, sentence(err))
				}
				if !ok {
					select {
					case <-ctx.Done():
						return nil
					case <-poll.C:
					}
					continue
				}
				got++
				line := tailLine{ID: m.Envelope.ID, Type: m.Envelope.Type, CorrelationID: m.Envelope.CorrelationID, Attempt: m.Envelope.Attempt,
					Error: m.Envelope.Error, RoutingKey: m.RoutingKey, ContentType: m.ContentType, Body: string(m.Body), Settled: "held"}
				if ack {
					if err := m.Ack(); err != nil {
						return fmt.Errorf("cannot remove message %s from %q (%s); it stays in the queue", m.Envelope.ID, q, sentence(err))
					}
					line.Settled = "acked"
				} else {
					held = append(held, m)
				}
				if err := writeJSONLine(out, line); err != nil {
					return err
				}
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().BoolVar(&ack, "ack", false, "remove each printed message from the queue")
	cmd.Flags().BoolVar(&requeue, "requeue", false, "return every message to the queue on exit (the default)")
	cmd.Flags().IntVarP(&n, "n", "n", 0, "stop after N messages (0 = no limit)")
	cmd.Flags().DurationVar(&dur, "for", 0, "stop after this long (0 = until interrupted or -n is reached)")
	return cmd
}
