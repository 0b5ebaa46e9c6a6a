// Command bench measures AceMQ for Go side by side with raw amqp091-go and
// watermill-amqp on one RabbitMQ broker, in one run, with the same message
// sizes and settings (persistent messages, durable classic queue,
// publisher confirms):
//
//	(a) raw amqp091-go, publish and wait for each confirm
//	(b) raw amqp091-go, pipelined confirms on one channel, window 1000
//	(b+h) as (b), carrying AceMQ's contract headers
//	(c) watermill-amqp v3, ConfirmDelivery, 64 publishing goroutines
//	(c+h) raw amqp091-go, 64 goroutines each awaiting its confirm on a
//	      channel of its own, carrying AceMQ's contract headers
//	(d) AceMQ Publisher.Send from 64 goroutines
//	(e) AceMQ Publisher.SendAll from one goroutine
//	consume+ack: raw amqp091-go (prefetch 250) vs AceMQ Consume (prefetch 250)
//
// Each scenario runs -repeat times (consumers -consume-repeat times) on a
// fresh queue and the median rate is reported: a broker on a shared
// machine varies a lot from run to run. The runs are interleaved (every
// scenario once per round), so drift in the machine's speed during the run
// moves every contender alike. Rows (b+h) and (c+h) are the ceilings for
// any client that carries the contract's headers.
// It prints a table with msg/s and the ratios the project's targets are
// stated in: (d)/(c) ≥ 1.25, (e)/(b) ≥ 1.0, AceMQ consume / raw ≥ 0.9.
//
//	cd bench && go run . -url amqp://guest:guest@127.0.0.1:5672/
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
)

// settle is the pause before each timed run: deleting the previous run's
// queue and writing a fill to disk keep the broker busy for a while after
// the calls return.
var settle time.Duration

type result struct {
	name  string
	size  int
	n     int
	rate  float64
	notes string
}

func main() {
	url := flag.String("url", os.Getenv("ACEMQ_URL"), "RabbitMQ URL (default $ACEMQ_URL)")
	n := flag.Int("n", 20000, "messages per pipelined scenario")
	nWait := flag.Int("n-wait", 2000, "messages for publish-and-wait (slow)")
	sizes := flag.String("sizes", "256,4096", "message sizes in bytes, comma-separated")
	goroutines := flag.Int("goroutines", 64, "publishing goroutines for (c) and (d)")
	channels := flag.Int("channels", acemq.DefaultPublishChannels, "AceMQ publishing channels")
	repeat := flag.Int("repeat", 3, "runs per scenario; the median rate is reported")
	consumeRepeat := flag.Int("consume-repeat", 7, "runs per consume scenario: the broker's cost per delivery is bimodal here (31-64 µs, for every client alike), so a median needs more runs")
	flag.DurationVar(&settle, "settle", time.Second, "pause before each run and between a consume run's fill and its consumer, so the broker finishes earlier work (deleting the previous queue, writing the fill) first")
	only := flag.String("only", "", "run only the scenarios whose name contains this text (e.g. consume)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatalf("bench: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatalf("bench: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *url == "" {
		log.Fatal("bench: give the broker with -url or ACEMQ_URL, e.g. -url amqp://guest:guest@127.0.0.1:5672/")
	}
	ctx := context.Background()
	var results []result
	for _, s := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || size <= 0 {
			log.Fatalf("bench: %q is not a message size in bytes", s)
		}
		body := make([]byte, size)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		// Scenarios are registered first and then run in rounds, every
		// scenario once per round, so a machine that speeds up or slows
		// down during the run moves every contender alike.
		type scenario struct {
			name  string
			count int
			f     func(q string, count int) (time.Duration, error)
			rates []float64
			rate  float64
		}
		var scenarios []*scenario
		run := func(name string, count int, f func(q string, count int) (time.Duration, error)) *float64 {
			sc := &scenario{name: name, count: count, f: f, rate: 1}
			if *only == "" || strings.Contains(name, *only) {
				scenarios = append(scenarios, sc)
			}
			return &sc.rate
		}
		a := run("(a) raw publish-and-wait", *nWait, func(q string, c int) (time.Duration, error) { return rawWait(*url, q, body, c) })
		b := run("(b) raw pipelined, 1 channel, window 1000", *n, func(q string, c int) (time.Duration, error) { return rawPipelined(*url, q, body, c, 1000, nil) })
		bh := run("(b+h) as (b), with AceMQ's headers", *n, func(q string, c int) (time.Duration, error) {
			return rawPipelined(*url, q, body, c, 1000, acemqHeaders(q))
		})
		cRate := run(fmt.Sprintf("(c) watermill-amqp, %d goroutines", *goroutines), *n, func(q string, c int) (time.Duration, error) {
			return watermillPublish(*url, q, body, c, *goroutines)
		})
		ch := run(fmt.Sprintf("(c+h) raw, %d goroutines, AceMQ's headers", *goroutines), *n, func(q string, c int) (time.Duration, error) {
			return rawConcurrent(*url, q, body, c, *goroutines, acemqHeaders(q))
		})
		d := run(fmt.Sprintf("(d) AceMQ Send, %d goroutines", *goroutines), *n, func(q string, c int) (time.Duration, error) {
			return acemqSend(ctx, *url, q, body, c, *goroutines, *channels)
		})
		e := run("(e) AceMQ SendAll, 1 goroutine", *n, func(q string, c int) (time.Duration, error) {
			return acemqSendAll(ctx, *url, q, body, c, *channels)
		})
		rc := run("consume raw amqp091-go, prefetch 250", *n, func(q string, c int) (time.Duration, error) { return rawConsume(*url, q, body, c) })
		ac := run("consume AceMQ, prefetch 250", *n, func(q string, c int) (time.Duration, error) { return acemqConsume(ctx, *url, q, body, c) })
		rounds := *repeat
		if *consumeRepeat > rounds {
			rounds = *consumeRepeat
		}
		for r := 0; r < rounds; r++ {
			for _, sc := range scenarios {
				if r >= *repeat && !strings.HasPrefix(sc.name, "consume") || r >= *consumeRepeat && strings.HasPrefix(sc.name, "consume") {
					continue
				}
				time.Sleep(settle)
				q := fmt.Sprintf("bench.%s.%d.%d", strings.Fields(sc.name)[0], size, time.Now().UnixNano())
				mustQueue(*url, q)
				d, err := sc.f(q, sc.count)
				deleteQueue(*url, q)
				if err != nil {
					log.Fatalf("bench: %s (%d B): %v", sc.name, size, err)
				}
				sc.rates = append(sc.rates, float64(sc.count)/d.Seconds())
			}
		}
		for _, sc := range scenarios {
			sort.Float64s(sc.rates)
			sc.rate = sc.rates[len(sc.rates)/2]
			results = append(results, result{name: sc.name, size: size, n: sc.count, rate: sc.rate})
			fmt.Fprintf(os.Stderr, "%-44s %5d B  %8.0f msg/s  (runs: %s)\n", sc.name, size, sc.rate, formatRates(sc.rates))
		}
		results = append(results,
			result{name: "ratio (d)/(c)  target >= 1.25", size: size, rate: *d / *cRate},
			result{name: "ratio (e)/(b)  target >= 1.0", size: size, rate: *e / *b},
			result{name: "ratio (d)/(b)", size: size, rate: *d / *b},
			result{name: "ratio (e)/(b+h)  same wire bytes", size: size, rate: *e / *bh},
			result{name: "ratio (b+h)/(b)  ceiling for (e)/(b)", size: size, rate: *bh / *b},
			result{name: "ratio (d)/(c+h)  same wire bytes", size: size, rate: *d / *ch},
			result{name: "ratio (c+h)/(c)  ceiling for (d)/(c)", size: size, rate: *ch / *cRate},
			result{name: "ratio (b)/(a)", size: size, rate: *b / *a},
			result{name: "ratio consume AceMQ/raw  target >= 0.9", size: size, rate: *ac / *rc},
		)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsize\tmessages\tmsg/s or ratio\t")
	for _, r := range results {
		if strings.HasPrefix(r.name, "ratio") {
			fmt.Fprintf(tw, "%s\t%d B\t\t%.2f\t\n", r.name, r.size, r.rate)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d B\t%d\t%.0f\t\n", r.name, r.size, r.n, r.rate)
	}
	tw.Flush()
}

func dial(url string) (*amqp.Connection, *amqp.Channel) {
	conn, err := amqp.Dial(url)
	if err != nil {
		log.Fatalf("bench: cannot connect: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		log.Fatalf("bench: cannot open a channel: %v", err)
	}
	return conn, ch
}

func mustQueue(url, q string) {
	conn, ch := dial(url)
	defer conn.Close()
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		log.Fatalf("bench: cannot declare %s: %v", q, err)
	}
}

func deleteQueue(url, q string) {
	conn, ch := dial(url)
	defer conn.Close()
	_, _ = ch.QueueDelete(q, false, false, false)
}

func rawWait(url, q string, body []byte, n int) (time.Duration, error) {
	conn, ch := dial(url)
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{DeliveryMode: 2, Body: body})
		if err != nil {
			return 0, err
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			return 0, fmt.Errorf("publish %d not confirmed: %v", i, err)
		}
	}
	return time.Since(start), nil
}

// acemqHeaders returns the headers an AceMQ publish carries, so a raw
// publish can be compared on the same wire bytes.
func acemqHeaders(q string) amqp.Table {
	h := amqp.Table{}
	for k, v := range acemq.NewEnvelope().WireHeaders() {
		h[k] = v
	}
	h[acemq.HeaderType] = q
	h[acemq.HeaderOrigin] = "bench@localhost"
	return h
}

func rawPipelined(url, q string, body []byte, n, window int, headers amqp.Table) (time.Duration, error) {
	conn, ch := dial(url)
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return 0, err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, window))
	sem := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			c, ok := <-confirms
			if !ok || !c.Ack {
				done <- errors.New("a publish was not acked")
				return
			}
			<-sem
		}
		done <- nil
	}()
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{DeliveryMode: 2, Body: body, Headers: headers, MessageId: "m"}); err != nil {
			return 0, err
		}
	}
	err := <-done
	return time.Since(start), err
}

// rawConcurrent is the least a client can do for (d): goroutines each
// publish on a confirm channel of their own and wait for that confirm, on
// one connection, carrying the given headers.
func rawConcurrent(url, q string, body []byte, n, goroutines int, headers amqp.Table) (time.Duration, error) {
	conn, setup := dial(url)
	defer conn.Close()
	setup.Close()
	chans := make([]*amqp.Channel, goroutines)
	for i := range chans {
		ch, err := conn.Channel()
		if err != nil {
			return 0, err
		}
		if err := ch.Confirm(false); err != nil {
			return 0, err
		}
		chans[i] = ch
	}
	ctx := context.Background()
	var lane atomic.Int64
	return concurrently(n, goroutines, func() func() error {
		ch := chans[lane.Add(1)-1]
		return func() error {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp.Publishing{DeliveryMode: 2, Body: body, Headers: headers, MessageId: "m"})
			if err == nil && !dc.Wait() {
				err = errors.New("a publish was nacked")
			}
			return err
		}
	})
}

func watermillPublish(url, q string, body []byte, n, goroutines int) (time.Duration, error) {
	cfg := wamqp.NewDurableQueueConfig(url)
	cfg.Publish.ConfirmDelivery = true
	cfg.Publish.ChannelPoolSize = goroutines
	pub, err := wamqp.NewPublisher(cfg, watermill.NopLogger{})
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	// Warm up: the first publish declares the queue.
	if err := pub.Publish(q, message.NewMessage(watermill.NewUUID(), body)); err != nil {
		return 0, err
	}
	publish := func() error { return pub.Publish(q, message.NewMessage(watermill.NewUUID(), body)) }
	return concurrently(n-1, goroutines, func() func() error { return publish })
}

func connect(ctx context.Context, url string, channels int) *acemq.Conn {
	c, err := acemq.Connect(ctx, url, acemq.WithPublishChannels(channels), acemq.WithLogger(acemq.DiscardLogger()), acemq.WithPrefetch(250))
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	return c
}

func acemqSend(ctx context.Context, url, q string, body []byte, n, goroutines, channels int) (time.Duration, error) {
	c := connect(ctx, url, channels)
	defer c.Close(ctx)
	pub := acemq.NewPublisher[[]byte](c, "", q, acemq.PublisherCodec(acemq.Bytes()))
	send := func() error {
		_, err := pub.Send(ctx, body)
		return err
	}
	return concurrently(n, goroutines, func() func() error { return send })
}

// concurrently times goroutines publishing n messages between them, each
// with the publish function its lane gives it (called once per goroutine,
// before the clock starts), until all are sent or one fails.
func concurrently(n, goroutines int, lane func() func() error) (time.Duration, error) {
	publishes := make([]func() error, goroutines)
	for g := range publishes {
		publishes[g] = lane()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	start := time.Now()
	for _, publish := range publishes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := publish(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}

func acemqSendAll(ctx context.Context, url, q string, body []byte, n, channels int) (time.Duration, error) {
	c := connect(ctx, url, channels)
	defer c.Close(ctx)
	pub := acemq.NewPublisher[[]byte](c, "", q, acemq.PublisherCodec(acemq.Bytes()))
	batch := make([][]byte, n)
	for i := range batch {
		batch[i] = body
	}
	start := time.Now()
	_, err := pub.SendAll(ctx, batch)
	return time.Since(start), err
}

// fill puts n messages on q with raw pipelined publishing.
// formatRates lists each run's rate, sorted, so the spread is visible.
func formatRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

func fill(url, q string, body []byte, n int) error {
	_, err := rawPipelined(url, q, body, n, 1000, nil)
	time.Sleep(settle)
	return err
}

func rawConsume(url, q string, body []byte, n int) (time.Duration, error) {
	if err := fill(url, q, body, n); err != nil {
		return 0, err
	}
	conn, ch := dial(url)
	defer conn.Close()
	if err := ch.Qos(250, 0, false); err != nil {
		return 0, err
	}
	deliveries, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	// Timed from the first delivery to the last, for both consumers, so
	// subscription set-up is not counted as throughput.
	var start time.Time
	for i := 0; i < n; i++ {
		d := <-deliveries
		if i == 0 {
			start = time.Now()
		}
		if err := d.Ack(false); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func acemqConsume(ctx context.Context, url, q string, body []byte, n int) (time.Duration, error) {
	if err := fill(url, q, body, n); err != nil {
		return 0, err
	}
	c := connect(ctx, url, 1)
	defer c.Close(ctx)
	var got atomic.Int64
	done := make(chan struct{})
	var start time.Time
	cons, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[[]byte]) acemq.Decision {
		switch got.Add(1) {
		case 1:
			start = time.Now()
		case int64(n):
			close(done)
		}
		return acemq.Accept()
	}, acemq.ConsumerCodec(acemq.Bytes()), acemq.ConsumerPrefetch(250))
	if err != nil {
		return 0, err
	}
	<-done
	d := time.Since(start)
	return d, cons.Close(ctx)
}
