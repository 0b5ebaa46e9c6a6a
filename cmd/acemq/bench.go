package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
)

// benchResult is what bench prints and writes as JSON.
type benchResult struct {
	URL         string  `json:"url"`
	Transport   string  `json:"transport"`
	QueueType   string  `json:"queueType"`
	Mode        string  `json:"mode"` // open-loop or unthrottled
	TargetRate  int     `json:"targetRate,omitempty"`
	Size        int     `json:"size"`
	Window      int     `json:"confirmWindow"`
	Sent        int64   `json:"sent"`
	Confirmed   int64   `json:"confirmed"`
	Consumed    int64   `json:"consumed"`
	Lost        int64   `json:"lost"`
	Seconds     float64 `json:"seconds"`
	PublishRate float64 `json:"publishRate"`
	ConsumeRate float64 `json:"consumeRate"`
	P50Ms       float64 `json:"p50Ms"`
	P90Ms       float64 `json:"p90Ms"`
	P99Ms       float64 `json:"p99Ms"`
	P999Ms      float64 `json:"p999Ms"`
	MaxMs       float64 `json:"maxMs"`
	LatencyFrom string  `json:"latencyFrom"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func newBench() *cobra.Command {
	var u, qtype, out string
	var rate, count, size, window int
	var dur time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Publish/consume benchmark: open-loop at --rate or unthrottled; latency percentiles; JSON report",
		Long: "Publish COUNT messages (or for --for) of --size bytes to a fresh queue and consume them on the same broker. " +
			"With --rate the publisher is open-loop: message i is due at start + i/rate and its latency is measured from that " +
			"INTENDED time, so a stalled broker shows up as latency instead of hiding as a lower rate (no coordinated omission). " +
			"Without --rate it publishes as fast as the confirm window allows and latency is measured from the send. " +
			"Prints a table; with --out FILE it also writes the same numbers as JSON there. The queue is deleted afterwards. Exits non-zero if a confirmed message was not consumed.",
		Example: `  acemq bench --url memory://bench --count 20000
  acemq bench --url amqp://guest:guest@localhost:5672/ --rate 2000 --for 10s --size 512 --queue-type quorum --out bench.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if size < 8 {
				return fmt.Errorf("--size must be at least 8 bytes (the send time is carried in the body), got %d; pass --size 8 or more", size)
			}
			if window < 1 {
				return fmt.Errorf("--window must be 1 or more, got %d; pass --window 1 or more", window)
			}
			if rate < 0 || count < 0 {
				return fmt.Errorf("--rate and --count cannot be negative; pass 0 or more")
			}
			if qtype != "quorum" && qtype != "classic" {
				return fmt.Errorf("--queue-type %q is not known; use quorum or classic", qtype)
			}
			if dur > 0 {
				if rate == 0 {
					return fmt.Errorf("--for needs --rate (an open-loop run); for an unthrottled run give --count")
				}
				count = int(dur.Seconds() * float64(rate))
			}
			if count < 1 {
				return fmt.Errorf("nothing to send; give --count N or --rate R --for D")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Minute)
			defer cancel()
			res, err := runBench(ctx, cmd.ErrOrStderr(), u, qtype, rate, count, size, window)
			if err != nil {
				return err
			}
			printBench(cmd.OutOrStdout(), res)
			if out != "" {
				b, _ := json.MarshalIndent(res, "", "  ")
				if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("cannot write the JSON report to %s (%v); pass --out with a writable path", out, err)
				}
			}
			if res.Lost > 0 {
				return fmt.Errorf("%d confirmed message(s) were not consumed within 30s; the broker or consumer lost or stalled them, see the table", res.Lost)
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	f := cmd.Flags()
	f.IntVar(&rate, "rate", 0, "target messages per second, open-loop (0 = unthrottled)")
	f.IntVar(&count, "count", 10000, "messages to send")
	f.DurationVar(&dur, "for", 0, "run for this long at --rate (overrides --count)")
	f.IntVar(&size, "size", 256, "message body size in bytes")
	f.IntVar(&window, "window", 100, "confirm window: publishes awaiting confirmation at once")
	f.StringVar(&qtype, "queue-type", "quorum", "quorum or classic")
	f.StringVar(&out, "out", "", "also write the numbers as JSON to this file (default: none)")
	return cmd
}

func runBench(ctx context.Context, progressOut io.Writer, u, qtype string, rate, count, size, window int) (benchResult, error) {
	c, err := connect(ctx, u, "acemq-bench", acemq.Config{MaxOutstandingPublishes: max(window, 1), Prefetch: max(window, 20)})
	if err != nil {
		return benchResult{}, err
	}
	defer closeConn(c)
	queue := fmt.Sprintf("acemq.bench.%d", time.Now().UnixNano())
	opt := acemq.QueueOptions{Type: acemq.Quorum}
	if qtype == "classic" {
		opt = acemq.QueueOptions{Type: acemq.Classic}
	}
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, opt)); err != nil {
		return benchResult{}, fmt.Errorf("cannot declare the benchmark queue (%s); check the broker and --queue-type", sentence(err))
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_, _ = c.DeleteQueue(dctx, queue)
	}()

	hist := newHistogram()
	var consumed atomic.Int64
	allIn := make(chan struct{})
	var confirmedTotal atomic.Int64
	var sendDone atomic.Bool
	var once sync.Once
	bar := newProgress(progressOut, "bench", int64(count))
	cons, err := acemq.Consume(ctx, c, queue, func(_ context.Context, m *acemq.Message[[]byte]) acemq.Decision {
		if len(m.Payload) >= 8 {
			due := time.Unix(0, int64(binary.BigEndian.Uint64(m.Payload)))
			hist.Record(time.Since(due))
		}
		n := consumed.Add(1)
		bar.Add(1)
		if sendDone.Load() && n >= confirmedTotal.Load() {
			once.Do(func() { close(allIn) })
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: acemq.Bytes(), NoDeadLetterDeclaration: true, Concurrency: 4, Prefetch: max(window, 20)})
	if err != nil {
		return benchResult{}, fmt.Errorf("cannot consume from the benchmark queue (%s); check the broker and retry", sentence(err))
	}

	pub := acemq.NewPublisher[[]byte](c, "", queue, acemq.PublisherConfig{Codec: acemq.Bytes()})
	start := time.Now()
	jobs := make(chan time.Time, window)
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < window; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, size)
			for due := range jobs {
				if due.IsZero() {
					due = time.Now()
				}
				binary.BigEndian.PutUint64(body, uint64(due.UnixNano()))
				sent.Add(1)
				if _, err := pub.Send(ctx, body); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				confirmedTotal.Add(1)
			}
		}()
	}
	mode := "unthrottled"
	if rate > 0 {
		mode = "open-loop"
	}
	timer := time.NewTimer(0)
	<-timer.C
loop:
	for i := 0; i < count; i++ {
		var due time.Time
		if rate > 0 {
			due = start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					break loop
				}
			}
		}
		select {
		case jobs <- due:
		case <-ctx.Done():
			break loop
		}
	}
	close(jobs)
	wg.Wait()
	pubElapsed := time.Since(start)
	sendDone.Store(true)
	if consumed.Load() >= confirmedTotal.Load() {
		once.Do(func() { close(allIn) })
	}
	drain := time.NewTimer(30 * time.Second)
	defer drain.Stop()
	select {
	case <-allIn:
	case <-drain.C:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	bar.Done()
	_ = cons.Close(ctx)
	if e, ok := firstErr.Load().(error); ok && confirmedTotal.Load() == 0 {
		return benchResult{}, fmt.Errorf("no message was confirmed (%s); check the broker", sentence(e))
	}
	res := benchResult{
		URL: redact.URL(u), Transport: c.Health(ctx).Transport, QueueType: qtype, Mode: mode, TargetRate: rate, Size: size, Window: window,
		Sent: sent.Load(), Confirmed: confirmedTotal.Load(), Consumed: consumed.Load(),
		Seconds:     elapsed.Seconds(),
		PublishRate: float64(confirmedTotal.Load()) / pubElapsed.Seconds(),
		ConsumeRate: float64(consumed.Load()) / elapsed.Seconds(),
		P50Ms:       ms(hist.Percentile(50)), P90Ms: ms(hist.Percentile(90)), P99Ms: ms(hist.Percentile(99)),
		P999Ms: ms(hist.Percentile(99.9)), MaxMs: ms(hist.Max()),
		LatencyFrom: "send",
	}
	if rate > 0 {
		res.LatencyFrom = "intended send time"
	}
	res.Lost = max(res.Confirmed-res.Consumed, 0)
	return res, nil
}

func printBench(w io.Writer, r benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "transport\t%s (%s queue)\n", r.Transport, r.QueueType)
	fmt.Fprintf(tw, "mode\t%s", r.Mode)
	if r.TargetRate > 0 {
		fmt.Fprintf(tw, " at %d msg/s", r.TargetRate)
	}
	fmt.Fprintf(tw, ", %d-byte messages, confirm window %d\n", r.Size, r.Window)
	fmt.Fprintf(tw, "sent / confirmed / consumed / lost\t%d / %d / %d / %d\n", r.Sent, r.Confirmed, r.Consumed, r.Lost)
	fmt.Fprintf(tw, "publish / consume rate\t%.0f / %.0f msg/s over %.2fs\n", r.PublishRate, r.ConsumeRate, r.Seconds)
	fmt.Fprintf(tw, "latency (from %s)\tp50 %.2fms  p90 %.2fms  p99 %.2fms  p99.9 %.2fms  max %.2fms\n", r.LatencyFrom, r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	tw.Flush()
}
