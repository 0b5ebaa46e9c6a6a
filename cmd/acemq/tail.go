package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
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
	var raw rawOutput
	var dur time.Duration
	var rf readFlags
	cmd := &cobra.Command{
		Use:   "tail QUEUE",
		Short: "Consume from QUEUE and print each envelope as one JSON line",
		Long: "Consume from QUEUE and print each envelope as one JSON line. With --requeue (the default) nothing is removed: " +
			"messages are held unacknowledged until tail exits and then returned to the queue (so at most 1000, or -n, are shown). " +
			"With --ack each printed message is removed. Returning a message redelivers it: where that would count toward the queue's " +
			"delivery limit (a quorum queue with one before RabbitMQ 4.3; RabbitMQ 4's default is 20) or hold it back, or where that " +
			"cannot be learned (the management API, --management-url), tail reads nothing without --ack or --unsafe-read. " +
			"The JSON lines keep every value exact, with control characters as JSON \\u escapes, so they are safe on a terminal; " +
			"--raw writes the bodies' bytes instead. " +
			"A count of 0 that cannot be confirmed (a quorum queue whose leader is being elected answers 0) is warned about on stderr " +
			"(\"count unknown …\"); tail subscribes anyway, and if it ends having printed nothing it exits 1 with that sentence rather than 0.",
		Example: `  acemq tail orders.new -n 10
  acemq tail orders.new.dlq --for 30s
  acemq tail orders.new --ack -n 1
  acemq tail orders.new -n 1 --raw > body.bin`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ack && requeue {
				return fmt.Errorf("--ack and --requeue contradict each other; pick one")
			}
			if n < 0 {
				return fmt.Errorf("-n must be 0 (no limit) or more, got %d; pass -n 0 or more", n)
			}
			if err := raw.check(cmd.OutOrStdout()); err != nil {
				return err
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
			// The count says whether the queue exists, and a 0 is
			// believed as dlq show believes it (replay.Count with the
			// management API). A subscription shows what the queue
			// delivers whatever the count, so an unknown one (a quorum
			// leader being elected) does not stop tail: it warns, and a
			// run that ends having printed nothing exits 1 saying so
			// rather than 0, which would read as an empty queue.
			var unknown error
			if _, err := replay.Count(ctx, c, q, rf.options(u)...); err != nil {
				var cu *replay.CountUnknownError
				if !errors.As(err, &cu) {
					return countError(q, err)
				}
				unknown = err
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s; tail subscribes anyway and prints what the queue delivers\n", safetext.Line(sentence(err)))
			}
			// How held messages go back (Access.ReturnByNack), and whether
			// holding them is allowed at all without --ack.
			access, err := replay.Inspect(ctx, c, q, rf.options(u)...)
			if err != nil && !ack {
				return fmt.Errorf("cannot tell what reading %q would do (%s); check the connection and retry", q, sentence(err))
			}
			if !ack && !access.Safe && !rf.unsafe {
				return unsafeReadError(&replay.UnsafeReadError{Access: access})
			}
			ch, err := c.Channel(ctx)
			if err != nil {
				return fmt.Errorf("cannot open a channel to read %q (%s); check the connection and retry", q, sentence(err))
			}
			// Held (unacked) messages count against the prefetch, so with
			// --requeue at most that many are shown before tail waits.
			prefetch := 1000
			if n > 0 {
				prefetch = min(n, 1000)
			}
			if err := ch.Qos(prefetch); err != nil {
				_ = ch.Close()
				return fmt.Errorf("cannot set the prefetch on %q (%s); check the connection and retry", q, sentence(err))
			}
			tag := "acemq-tail-" + acemq.NewEnvelope().ID
			deliveries, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: q, Tag: tag})
			if err != nil {
				_ = ch.Close()
				return fmt.Errorf("cannot consume from %q (%s); check the name and the connection", q, sentence(err))
			}
			defer func() {
				// Held messages (and any the broker sent past the last
				// printed) go back to the queue, in order, on exit. The
				// subscription ends first, so none comes back to tail;
				// then, where a nack is what keeps them uncounted (a quorum
				// queue with a limit on RabbitMQ 4.3+), one nack hands them
				// all back; elsewhere the close does, which keeps their
				// place (on a quorum queue without a limit a nack would put
				// them last).
				_ = ch.Cancel(context.WithoutCancel(ctx), tag)
				if r, ok := ch.(transport.Releaser); ok && access.ReturnByNack {
					_ = r.ReleaseAll()
				}
				_ = ch.Close()
			}()
			out := cmd.OutOrStdout()
			rw := &rawWriter{w: out}
			for got := 0; n == 0 || got < n; got++ {
				var d transport.Delivery
				var ok bool
				select {
				case <-ctx.Done():
					return emptyHanded(q, got, unknown)
				case d, ok = <-deliveries:
				}
				if !ok {
					if ctx.Err() != nil {
						return emptyHanded(q, got, unknown)
					}
					return fmt.Errorf("the broker ended tail's subscription to %q (%v); check whether the queue was deleted and run tail again", q, ch.Err())
				}
				env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.ReplyTo)
				line := tailLine{ID: env.ID, Type: env.Type, CorrelationID: env.CorrelationID, Attempt: env.Attempt,
					Error: env.Error, RoutingKey: d.RoutingKey, ContentType: d.ContentType, Body: string(d.Body), Settled: "held"}
				if ack {
					if err := ch.Ack(d.DeliveryTag); err != nil {
						return fmt.Errorf("cannot remove message %s from %q (%s); it stays in the queue", idLine(env.ID), q, sentence(err))
					}
					line.Settled = "acked"
				}
				if raw != rawOff {
					err = rw.body(d.Body)
				} else {
					err = writeJSONLine(out, line)
				}
				if err != nil {
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
	rawFlag(cmd, &raw, "write only the bodies")
	rf.register(cmd)
	return cmd
}

// emptyHanded is how a tail of q that printed got messages ends: nil,
// unless it printed none and q's count was unknown (unknown, from
// replay.Count), which is no evidence that q is empty.
func emptyHanded(q string, got int, unknown error) error {
	if got > 0 || unknown == nil {
		return nil
	}
	return fmt.Errorf("tail printed no message from %s, which does not show it empty: %s", q, sentence(unknown))
}
