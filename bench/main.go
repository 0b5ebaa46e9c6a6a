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
//	(d-off), (e-off) as (d), (e) with ?coalesce=off
//	(d-amqp091), (e-amqp091) as (d), (e) with ?frames=amqp091 (amqp091-go
//	      writes the publish frames and reads the confirms)
//	consume+ack: raw amqp091-go (prefetch 250) vs AceMQ Consume (prefetch 250)
//
// Each scenario runs -repeat times (consumers -consume-repeat times) on a
// fresh queue and the median rate is reported: a broker on a shared
// machine varies a lot from run to run. The runs are interleaved (every
// scenario once per round), so drift in the machine's speed during the run
// moves every contender alike. Rows (b+h) and (c+h) are the ceilings for
// any client that carries the contract's headers.
// Each run of a scenario is a process of its own (this program re-run
// with -child-*; -isolate=false keeps them in one), so the client's CPU
// time (user + system, from getrusage) and heap allocations per message
// are that contender's alone; a consume run's queue is filled by the
// parent before its child starts, so the fill is not charged to it.
// It prints per contender and size the median msg/s, client CPU µs per
// message and allocations per message, and the ratios the project's
// targets are stated in (issue 16): (d)/(c) CPU ≤ 0.5, (e)/(b+h) CPU
// ≤ 1.25, (e)/(b+h) msg/s ≥ 0.95, AceMQ consume / raw msg/s ≥ 0.9.
//
//	cd bench && go run . -url amqp://guest:guest@127.0.0.1:5672/
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
)

// settle is the pause before each timed run: deleting the previous run's
// queue and writing a fill to disk keep the broker busy for a while after
// the calls return.
var settle time.Duration

// sample is one timed run: its wall time and what the client process
// spent on it (CPU time, user + system, and heap allocations).
type sample struct {
	Seconds float64 `json:"seconds"`
	CPU     float64 `json:"cpu"`
	Mallocs uint64  `json:"mallocs"`
}

// scenario is one contender: prep (run by the parent, not measured)
// readies the queue, f is the measured part.
type scenario struct {
	name    string
	count   int
	prep    func(q string, count int) error
	f       func(q string, count int) (time.Duration, error)
	samples []sample
	rate    float64 // median msg/s
	cpu     float64 // median CPU µs per message
	allocs  float64 // median allocations per message
}

// options are the flags every process of a run shares.
type options struct {
	url                   string
	n, nWait              int
	goroutines, channels  int
	repeat, consumeRepeat int
	only                  string
	isolate               bool
	ctxTimeout            time.Duration
}

// scenarios lists the contenders for one message size, in table order.
func scenarios(ctx context.Context, o options, body []byte) []*scenario {
	var list []*scenario
	add := func(name string, count int, prep func(string, int) error, f func(string, int) (time.Duration, error)) {
		list = append(list, &scenario{name: name, count: count, prep: prep, f: f})
	}
	url := o.url
	add("(a) raw publish-and-wait", o.nWait, nil, func(q string, c int) (time.Duration, error) { return rawWait(url, q, body, c) })
	add("(b) raw pipelined, 1 channel, window 1000", o.n, nil, func(q string, c int) (time.Duration, error) { return rawPipelined(url, q, body, c, 1000, nil) })
	add("(b+h) as (b), with AceMQ's headers", o.n, nil, func(q string, c int) (time.Duration, error) {
		return rawPipelined(url, q, body, c, 1000, acemqHeaders(q))
	})
	add(fmt.Sprintf("(c) watermill-amqp, %d goroutines", o.goroutines), o.n, nil, func(q string, c int) (time.Duration, error) {
		return watermillPublish(url, q, body, c, o.goroutines)
	})
	add(fmt.Sprintf("(c+h) raw, %d goroutines, AceMQ's headers", o.goroutines), o.n, nil, func(q string, c int) (time.Duration, error) {
		return rawConcurrent(url, q, body, c, o.goroutines, acemqHeaders(q))
	})
	add(fmt.Sprintf("(d) AceMQ Send, %d goroutines", o.goroutines), o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSend(ctx, url, q, body, c, o.goroutines, o.channels)
	})
	add("(e) AceMQ SendAll, 1 goroutine", o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSendAll(ctx, url, q, body, c, o.channels)
	})
	// The same two with every write straight to the socket (the RabbitMQ
	// transport's ?coalesce=off), so one run shows what holding saves.
	off := withQuery(url, "coalesce=off")
	add("(d-off) as (d), coalesce=off", o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSend(ctx, off, q, body, c, o.goroutines, o.channels)
	})
	add("(e-off) as (e), coalesce=off", o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSendAll(ctx, off, q, body, c, o.channels)
	})
	// The same two with amqp091-go writing the publish frames and reading
	// the confirms (the RabbitMQ transport's ?frames=amqp091), so one run
	// shows what AceMQ's own frames save.
	old := withQuery(url, "frames=amqp091")
	add("(d-amqp091) as (d), frames=amqp091", o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSend(ctx, old, q, body, c, o.goroutines, o.channels)
	})
	add("(e-amqp091) as (e), frames=amqp091", o.n, nil, func(q string, c int) (time.Duration, error) {
		return acemqSendAll(ctx, old, q, body, c, o.channels)
	})
	fillQ := func(q string, c int) error { return fill(url, q, body, c) }
	add("consume raw amqp091-go, prefetch 250", o.n, fillQ, func(q string, c int) (time.Duration, error) { return rawConsume(url, q, c) })
	add("consume AceMQ, prefetch 250", o.n, fillQ, func(q string, c int) (time.Duration, error) { return acemqConsume(ctx, url, q, c) })
	return list
}

// withQuery adds a query parameter to a URL.
func withQuery(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// measure runs f and reports its time and the process's CPU and
// allocations while it ran.
func measure(f func() (time.Duration, error)) (sample, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	var r0, r1 syscall.Rusage
	runtime.ReadMemStats(&m0)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r0); err != nil {
		return sample{}, err
	}
	d, err := f()
	if err2 := syscall.Getrusage(syscall.RUSAGE_SELF, &r1); err2 != nil && err == nil {
		err = err2
	}
	runtime.ReadMemStats(&m1)
	cpu := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
	}
	return sample{Seconds: d.Seconds(), CPU: cpu(r1) - cpu(r0), Mallocs: m1.Mallocs - m0.Mallocs}, err
}

// runIsolated runs one scenario in a child process of its own (this
// program, re-run with -child-*), so its CPU and garbage are its own and
// no earlier contender's goroutines or heap are charged to it.
func runIsolated(o options, sc *scenario, size int, q string) (sample, error) {
	exe, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	cmd := exec.Command(exe, "-url", o.url, "-n", strconv.Itoa(o.n), "-n-wait", strconv.Itoa(o.nWait),
		"-goroutines", strconv.Itoa(o.goroutines), "-channels", strconv.Itoa(o.channels),
		"-ctx-timeout", o.ctxTimeout.String(),
		"-child-scenario", sc.name, "-child-size", strconv.Itoa(size), "-child-queue", q)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return sample{}, fmt.Errorf("the child process for %s: %w", sc.name, err)
	}
	var smp sample
	if err := json.Unmarshal(out, &smp); err != nil {
		return sample{}, fmt.Errorf("the child process for %s printed %q: %w", sc.name, out, err)
	}
	return smp, nil
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", os.Getenv("ACEMQ_URL"), "RabbitMQ URL (default $ACEMQ_URL)")
	flag.IntVar(&o.n, "n", 20000, "messages per pipelined scenario")
	flag.IntVar(&o.nWait, "n-wait", 2000, "messages for publish-and-wait (slow)")
	sizes := flag.String("sizes", "256,4096", "message sizes in bytes, comma-separated")
	flag.IntVar(&o.goroutines, "goroutines", 64, "publishing goroutines for (c) and (d)")
	flag.IntVar(&o.channels, "channels", 0, "AceMQ publishing channels (0: the library default, 4)")
	flag.DurationVar(&o.ctxTimeout, "ctx-timeout", 0, "run AceMQ's calls under one context with this deadline, so every write is watched as a Send with a deadline is (measures what a context that can end costs); 0: context.Background()")
	flag.IntVar(&o.repeat, "repeat", 3, "runs per scenario; the median rate is reported")
	flag.IntVar(&o.consumeRepeat, "consume-repeat", 7, "runs per consume scenario: the broker's cost per delivery is bimodal here (31-64 µs, for every client alike), so a median needs more runs")
	flag.DurationVar(&settle, "settle", time.Second, "pause before each run and between a consume run's fill and its consumer, so the broker finishes earlier work (deleting the previous queue, writing the fill) first")
	flag.StringVar(&o.only, "only", "", "run only the scenarios whose name contains this text (e.g. consume)")
	flag.BoolVar(&o.isolate, "isolate", true, "run each scenario in a process of its own, so its CPU time and allocations are its own")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (with -isolate=false: the children are not profiled)")
	childScenario := flag.String("child-scenario", "", "internal: run this one scenario and print its sample as JSON")
	childSize := flag.Int("child-size", 0, "internal: the child's message size")
	childQueue := flag.String("child-queue", "", "internal: the child's queue")
	flag.Parse()
	if o.url == "" {
		log.Fatal("bench: give the broker with -url or ACEMQ_URL, e.g. -url amqp://guest:guest@127.0.0.1:5672/")
	}
	ctx := context.Background()
	if o.ctxTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.ctxTimeout)
		defer cancel()
	}
	if *childScenario != "" {
		for _, sc := range scenarios(ctx, o, makeBody(*childSize)) {
			if sc.name == *childScenario {
				smp, err := measure(func() (time.Duration, error) { return sc.f(*childQueue, sc.count) })
				if err != nil {
					log.Fatalf("bench: %s (%d B): %v", sc.name, *childSize, err)
				}
				if err := json.NewEncoder(os.Stdout).Encode(smp); err != nil {
					log.Fatal(err)
				}
				return
			}
		}
		log.Fatalf("bench: no scenario is named %q", *childScenario)
	}
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
	type row struct {
		name, value string
		size        int
		sc          *scenario
	}
	var rows []row
	for _, s := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || size <= 0 {
			log.Fatalf("bench: %q is not a message size in bytes", s)
		}
		all := scenarios(ctx, o, makeBody(size))
		var run []*scenario
		for _, sc := range all {
			if o.only == "" || strings.Contains(sc.name, o.only) {
				run = append(run, sc)
			}
		}
		// Every scenario once per round, so a machine that speeds up or
		// slows down during the run moves every contender alike.
		rounds := max(o.repeat, o.consumeRepeat)
		for r := 0; r < rounds; r++ {
			for _, sc := range run {
				consume := strings.HasPrefix(sc.name, "consume")
				if !consume && r >= o.repeat || consume && r >= o.consumeRepeat {
					continue
				}
				time.Sleep(settle)
				q := fmt.Sprintf("bench.%s.%d.%d", strings.Fields(sc.name)[0], size, time.Now().UnixNano())
				mustQueue(o.url, q)
				if sc.prep != nil {
					if err := sc.prep(q, sc.count); err != nil {
						log.Fatalf("bench: %s (%d B): preparing: %v", sc.name, size, err)
					}
				}
				var smp sample
				if o.isolate {
					smp, err = runIsolated(o, sc, size, q)
				} else {
					smp, err = measure(func() (time.Duration, error) { return sc.f(q, sc.count) })
				}
				deleteQueue(o.url, q)
				if err != nil {
					log.Fatalf("bench: %s (%d B): %v", sc.name, size, err)
				}
				sc.samples = append(sc.samples, smp)
			}
		}
		byName := map[string]*scenario{}
		for _, sc := range run {
			rates := make([]float64, len(sc.samples))
			cpus := make([]float64, len(sc.samples))
			allocs := make([]float64, len(sc.samples))
			for i, smp := range sc.samples {
				rates[i] = float64(sc.count) / smp.Seconds
				cpus[i] = smp.CPU / float64(sc.count) * 1e6
				allocs[i] = float64(smp.Mallocs) / float64(sc.count)
			}
			sc.rate, sc.cpu, sc.allocs = median(rates), median(cpus), median(allocs)
			byName[strings.Fields(sc.name)[0]] = sc
			if strings.HasPrefix(sc.name, "consume") {
				byName[sc.name] = sc
			}
			rows = append(rows, row{name: sc.name, size: size, sc: sc})
			fmt.Fprintf(os.Stderr, "%-44s %5d B  %8.0f msg/s  %6.1f µs CPU/msg  %6.1f allocs/msg  (rates: %s)\n", sc.name, size, sc.rate, sc.cpu, sc.allocs, formatRates(rates))
		}
		ratio := func(name string, f func(get func(string) *scenario) float64) {
			defer func() { _ = recover() }() // a ratio whose scenarios were not run (-only) is left out
			rows = append(rows, row{name: name, size: size, value: fmt.Sprintf("%.2f", f(func(k string) *scenario { return byName[k] }))})
		}
		ratio("ratio (d)/(c)  msg/s", func(g func(string) *scenario) float64 { return g("(d)").rate / g("(c)").rate })
		ratio("ratio (e)/(b+h)  msg/s, same wire bytes, target >= 0.95", func(g func(string) *scenario) float64 { return g("(e)").rate / g("(b+h)").rate })
		ratio("ratio (d)/(c+h)  msg/s, same wire bytes", func(g func(string) *scenario) float64 { return g("(d)").rate / g("(c+h)").rate })
		ratio("ratio (b+h)/(b)  msg/s, the headers' cost at the broker", func(g func(string) *scenario) float64 { return g("(b+h)").rate / g("(b)").rate })
		ratio("ratio consume AceMQ/raw  msg/s, target >= 0.9", func(g func(string) *scenario) float64 {
			return g("consume AceMQ, prefetch 250").rate / g("consume raw amqp091-go, prefetch 250").rate
		})
		ratio("ratio (d)/(c)  CPU per message, target <= 0.5", func(g func(string) *scenario) float64 { return g("(d)").cpu / g("(c)").cpu })
		ratio("ratio (e)/(b+h)  CPU per message, target <= 1.25", func(g func(string) *scenario) float64 { return g("(e)").cpu / g("(b+h)").cpu })
		ratio("ratio (d-off)/(c)  CPU per message, coalesce=off", func(g func(string) *scenario) float64 { return g("(d-off)").cpu / g("(c)").cpu })
		ratio("ratio (e-off)/(b+h)  CPU per message, coalesce=off", func(g func(string) *scenario) float64 { return g("(e-off)").cpu / g("(b+h)").cpu })
		ratio("ratio (e-off)/(b+h)  msg/s, coalesce=off", func(g func(string) *scenario) float64 { return g("(e-off)").rate / g("(b+h)").rate })
		ratio("ratio (d-amqp091)/(c)  CPU per message, frames=amqp091", func(g func(string) *scenario) float64 { return g("(d-amqp091)").cpu / g("(c)").cpu })
		ratio("ratio (e-amqp091)/(b+h)  CPU per message, frames=amqp091", func(g func(string) *scenario) float64 { return g("(e-amqp091)").cpu / g("(b+h)").cpu })
		ratio("ratio consume AceMQ/raw  CPU per message", func(g func(string) *scenario) float64 {
			return g("consume AceMQ, prefetch 250").cpu / g("consume raw amqp091-go, prefetch 250").cpu
		})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsize\tmessages\tmsg/s\tCPU µs/msg\tallocs/msg\t")
	for _, r := range rows {
		if r.sc == nil {
			fmt.Fprintf(tw, "%s\t%d B\t\t%s\t\t\t\n", r.name, r.size, r.value)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d B\t%d\t%.0f\t%.1f\t%.1f\t\n", r.name, r.size, r.sc.count, r.sc.rate, r.sc.cpu, r.sc.allocs)
	}
	tw.Flush()
}

func makeBody(size int) []byte {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	return body
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
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
	h[header.Type] = q
	h[header.Origin] = "bench@localhost"
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
	c, err := acemq.Connect(ctx, url, acemq.Config{PublishChannels: channels, Logger: slog.New(slog.DiscardHandler), Prefetch: 250})
	if err != nil {
		log.Fatalf("bench: %v", err)
	}
	return c
}

func acemqSend(ctx context.Context, url, q string, body []byte, n, goroutines, channels int) (time.Duration, error) {
	c := connect(ctx, url, channels)
	defer c.Close(ctx)
	pub := acemq.NewPublisher[[]byte](c, "", q, acemq.PublisherConfig{Codec: acemq.Bytes()})
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
	pub := acemq.NewPublisher[[]byte](c, "", q, acemq.PublisherConfig{Codec: acemq.Bytes()})
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

func rawConsume(url, q string, n int) (time.Duration, error) {
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

func acemqConsume(ctx context.Context, url, q string, n int) (time.Duration, error) {
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
	}, acemq.ConsumerConfig{Codec: acemq.Bytes(), Prefetch: 250})
	if err != nil {
		return 0, err
	}
	<-done
	d := time.Since(start)
	return d, cons.Close(ctx)
}
