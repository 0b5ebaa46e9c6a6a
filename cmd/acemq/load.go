package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
	"github.com/acemq-go/acemq/loadline"
)

func newLoad() *cobra.Command {
	var u, queue string
	var rate int
	var interval, dur time.Duration
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Standing load for drills: publish and consume at --rate, one JSON sample line per interval",
		Long: "Publish to and consume from --queue (quorum, declared if missing) at --rate, and print the contract's standing-load " +
			"sample (§7) on stdout: one JSON object per --interval plus a final one on exit; logs go to stderr. " +
			"--for 0 (or ACEMQ_EXAMPLE_SECONDS=0) runs until interrupted.",
		Example: `  acemq load --url amqp://guest:guest@localhost:5672/ --rate 500 --for 1m
  acemq load --url memory://drill --rate 100 --interval 500ms --for 3s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rate < 1 {
				return fmt.Errorf("--rate must be 1 or more messages per second, got %d; pass --rate 1 or more", rate)
			}
			if interval <= 0 {
				return fmt.Errorf("--interval must be positive, got %v; pass e.g. --interval 1s", interval)
			}
			if s, ok := os.LookupEnv("ACEMQ_EXAMPLE_SECONDS"); ok && !cmd.Flags().Changed("for") {
				n, err := strconv.Atoi(s)
				if err != nil || n < 0 {
					return fmt.Errorf("ACEMQ_EXAMPLE_SECONDS=%q is not a whole number of seconds; unset it or set it to 0 or more", s)
				}
				dur = time.Duration(n) * time.Second
			}
			ctx := cmd.Context() // cancelled by Ctrl-C or SIGTERM (main)
			if dur > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, dur)
				defer cancel()
			}
			return runLoad(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), u, queue, rate, interval)
		},
	}
	if v := os.Getenv("ACEMQ_URL"); v == "" {
		cmd.Flags().StringVar(&u, "url", "amqp://guest:guest@localhost:5672", "broker URL (default $ACEMQ_URL, else amqp://guest:guest@localhost:5672)")
	} else {
		urlFlag(cmd, &u)
	}
	cmd.Flags().StringVar(&queue, "queue", "go-standing-load.orders", "queue to load (quorum)")
	cmd.Flags().IntVar(&rate, "rate", 500, "messages per second")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "sample interval")
	cmd.Flags().DurationVar(&dur, "for", time.Minute, "run this long (0 = until interrupted)")
	return cmd
}

func runLoad(ctx context.Context, out, logw io.Writer, u, queue string, rate int, interval time.Duration) error {
	c, err := connect(ctx, u, "acemq-load", acemq.Config{WaitForRecovery: true})
	if err != nil {
		return err
	}
	defer closeConn(c)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{})); err != nil {
		return fmt.Errorf("cannot declare %s (%s); delete it if it exists with other settings, or pass another --queue", queue, sentence(err))
	}
	cons, err := acemq.Consume(ctx, c, queue, func(context.Context, *acemq.Message[[]byte]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Codec: acemq.Bytes()})
	if err != nil {
		return fmt.Errorf("cannot consume from %s (%s); check the broker", queue, sentence(err))
	}
	fmt.Fprintf(logw, "load: %d msg/s on %s at %s\n", rate, queue, redact.URL(u))
	pub := acemq.NewPublisher[[]byte](c, "", queue, acemq.PublisherConfig{Codec: acemq.Bytes()})
	var wg sync.WaitGroup
	slots := make(chan struct{}, 256)
	body := []byte(`{"order":"standing-load"}`)
	// Sends outlive the run's end by up to 10s, so the last ones finish
	// instead of counting as refused.
	sendCtx, stopSends := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSends()
	send := func() {
		defer wg.Done()
		defer func() { <-slots }()
		_, _ = pub.Send(sendCtx, body) // outcomes are counted by the Conn's stats
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	// The sampler gets its own context, cancelled only once every send has
	// finished and the consumer has drained, so the final line is complete.
	lineCtx, stopLines := context.WithCancel(context.WithoutCancel(ctx))
	lines := make(chan error, 1)
	go func() { lines <- loadline.Run(lineCtx, c, out, interval) }()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			select {
			case slots <- struct{}{}:
				wg.Add(1)
				go send()
			default:
				// 256 sends already wait (a blocked broker): skip this
				// tick rather than queue without bound.
			}
		}
	}
	grace := time.AfterFunc(10*time.Second, stopSends)
	wg.Wait()
	grace.Stop()
	// Let the consumer catch up with what was confirmed (up to 5s), so the
	// final line shows the run's whole outcome.
	catchUp := time.NewTimer(5 * time.Second)
	defer catchUp.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for s := c.Stats(); s.Consumed < s.Confirmed; s = c.Stats() {
		select {
		case <-poll.C:
			continue
		case <-catchUp.C:
		}
		break
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = cons.Close(cctx)
	stopLines()
	if err := <-lines; err != nil {
		return fmt.Errorf("cannot write the sample lines (%s); check stdout", sentence(err))
	}
	return nil
}
