// Command streamread measures reading a RabbitMQ stream from first to last,
// side by side in one run, three ways:
//
//	amqp091    a bare amqp091-go channel: basic.consume with
//	           x-stream-offset=first, prefetch as stream.Read uses (10),
//	           an ack per message, nothing decoded
//	stream.Read AceMQ's reader over AMQP 0-9-1 (decode, handler, ack per
//	           message, offsets), prefetch 10
//	native     github.com/rabbitmq/rabbitmq-stream-go-client v1.8.3 over
//	           the rabbitmq_stream plugin's port, from first, default
//	           credits, kernel-sized socket buffers (the client decodes each
//	           message's AMQP 1.0 sections; the handler does nothing)
//	native+decode the same, with the per-message work a native reader
//	           behind stream.Read's API would add: the contract envelope
//	           read from the application properties (acemq.ReadEnvelope)
//	           and the body decoded with the Conn's codec into the same
//	           map[string]string stream.Read decodes into
//
// The stream is filled once beforehand (-n envelopes of -size bytes in
// confirmed batches of 1000, as AceMQ's PublishRawBatch writes them), then
// each contender reads all of it -repeat times, interleaved (every
// contender once per round) so drift in a shared machine's speed moves
// them alike. It prints per contender the median messages/s and client CPU
// µs per message (user + system from getrusage, this process, around each
// read; the amqp091 and native reads open their connection inside it, one
// connect each, stream.Read uses the Conn that filled the stream).
//
//	cd bench && go run ./streamread -url "$ACEMQ_TEST_AMQP_URL" -stream-url "$ACEMQ_TEST_STREAM_URL"
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
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	namqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	native "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
)

type result struct {
	seconds, cpu float64 // wall and client CPU seconds
}

func main() {
	url := flag.String("url", os.Getenv("ACEMQ_TEST_AMQP_URL"), "AMQP 0-9-1 URL")
	surl := flag.String("stream-url", os.Getenv("ACEMQ_TEST_STREAM_URL"), "native stream protocol URL (rabbitmq-stream://user:pass@host:port/vhost)")
	n := flag.Int("n", 200_000, "messages in the stream")
	size := flag.Int("size", 256, "approximate body bytes per message")
	repeat := flag.Int("repeat", 3, "reads per contender (median reported)")
	prefetch := flag.Int("prefetch", 10, "AMQP prefetch for amqp091 and stream.Read")
	timeout := flag.Duration("timeout", 5*time.Minute, "longest one read may take")
	flag.Parse()
	if *url == "" || *surl == "" {
		log.Fatal("acemq: streamread needs -url and -stream-url (or ACEMQ_TEST_AMQP_URL and ACEMQ_TEST_STREAM_URL); run make services-up and source .tmp/rabbitmq/env")
	}
	ctx := context.Background()
	c, err := acemq.Connect(ctx, *url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	name := fmt.Sprintf("bench.streamread.%d", time.Now().UnixNano())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(name, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, q := range []string{name, acemq.DeadLetterQueue(name), acemq.ParkedQueue(name)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()
	t0 := time.Now()
	if err := fill(ctx, c, name, *n, *size); err != nil {
		log.Fatal(err)
	}
	log.Printf("filled %s with %d messages in %.1f s", name, *n, time.Since(t0).Seconds())

	contenders := []struct {
		name string
		read func(round int) error
	}{
		{fmt.Sprintf("amqp091-go channel (prefetch %d)", *prefetch), func(int) error { return readAMQP(*url, name, *n, *prefetch, *timeout) }},
		{fmt.Sprintf("stream.Read over AMQP (prefetch %d)", *prefetch), func(round int) error {
			return readAceMQ(c, name, fmt.Sprint("bench-", round), *n, *prefetch, *timeout)
		}},
		{"native stream client", func(int) error { return readNative(*surl, name, *n, *timeout, nil) }},
		{"native + envelope and decode", func(int) error {
			return readNative(*surl, name, *n, *timeout, func(m *namqp.Message) error {
				props := m.Properties
				if props == nil {
					return errors.New("a message without properties")
				}
				id, _ := props.MessageID.(string)
				env := acemq.ReadEnvelope(m.ApplicationProperties, name, id, props.ReplyTo)
				var v map[string]string
				if err := c.Config().Codec.Decode(props.ContentType, m.GetData(), &v); err != nil {
					return err
				}
				if env.ID == "" || len(v) == 0 {
					return errors.New("an empty envelope or payload")
				}
				return nil
			})
		}},
	}
	results := make([][]result, len(contenders))
	for round := 0; round < *repeat; round++ {
		for i, k := range contenders {
			r, err := measure(func() error { return k.read(round) })
			if err != nil {
				log.Fatalf("%s, round %d: %v", k.name, round+1, err)
			}
			log.Printf("round %d %-36s %9.0f msg/s %6.2f µs CPU/msg", round+1, k.name, float64(*n)/r.seconds, r.cpu*1e6/float64(*n))
			results[i] = append(results[i], r)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "reader\tmsg/s\tCPU µs/msg\tvs stream.Read\t\n")
	base := median(results[1], func(r result) float64 { return float64(*n) / r.seconds })
	for i, k := range contenders {
		rate := median(results[i], func(r result) float64 { return float64(*n) / r.seconds })
		cpu := median(results[i], func(r result) float64 { return r.cpu * 1e6 / float64(*n) })
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.1f×\t\n", k.name, rate, cpu, rate/base)
	}
	_ = tw.Flush()
	fmt.Printf("(%d messages of about %d B, median of %d reads each)\n", *n, *size, *repeat)
}

// fill writes n envelopes with AceMQ's contract headers in confirmed
// batches of 1000.
func fill(ctx context.Context, c *acemq.Conn, name string, n, size int) error {
	pad := size - 16
	if pad < 0 {
		pad = 0
	}
	body, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", pad)})
	for done := 0; done < n; {
		batch := make([]acemq.RawMessage, 0, 1000)
		for i := 0; i < 1000 && done+i < n; i++ {
			env := acemq.NewEnvelope()
			env.Type = "bench"
			batch = append(batch, acemq.RawMessage{RoutingKey: name, ContentType: "application/json", MessageID: env.ID,
				Headers: env.WireHeaders(), Body: body})
		}
		for _, err := range c.PublishRawBatch(ctx, batch) {
			if err != nil {
				return err
			}
		}
		done += len(batch)
	}
	return nil
}

// measure runs f and returns its wall time and this process's CPU time.
func measure(f func() error) (result, error) {
	u0 := cpuSeconds()
	t0 := time.Now()
	err := f()
	return result{seconds: time.Since(t0).Seconds(), cpu: cpuSeconds() - u0}, err
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// readAMQP reads n messages from first on a bare channel, acking each.
// The connection is opened inside the measured call (one TCP connect).
func readAMQP(url, name string, n, prefetch int, timeout time.Duration) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(name, "bench-amqp091", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		return err
	}
	deadline := time.After(timeout)
	for got := 0; got < n; got++ {
		select {
		case d, ok := <-ds:
			if !ok {
				return errors.New("the channel closed")
			}
			if err := d.Ack(false); err != nil {
				return err
			}
		case <-deadline:
			return fmt.Errorf("read %d of %d in %v", got, n, timeout)
		}
	}
	return nil
}

// readAceMQ reads n messages from first with stream.Read on c.
func readAceMQ(c *acemq.Conn, name, reader string, n, prefetch int, timeout time.Duration) error {
	ctx := context.Background()
	done := make(chan struct{})
	var count atomic.Int64
	r, err := stream.Read(ctx, c, name, reader, func(_ context.Context, m *stream.Message[map[string]string]) acemq.Decision {
		if count.Add(1) == int64(n) {
			close(done)
		}
		return acemq.Accept()
	}, stream.From(stream.First()), stream.Prefetch(prefetch), stream.LagProbe(0))
	if err != nil {
		return err
	}
	defer func() { _ = r.Close(ctx) }()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("read %d of %d in %v", count.Load(), n, timeout)
	}
}

// readNative reads n messages from first with the native stream client;
// the environment (its locator connection) is made inside the measured call.
// With work, each message also goes through work; its first error ends the read.
func readNative(url, name string, n int, timeout time.Duration, work func(*namqp.Message) error) error {
	env, err := native.NewEnvironment(native.NewEnvironmentOptions().SetUri(url).SetReadBuffer(0).SetWriteBuffer(0))
	if err != nil {
		return err
	}
	defer func() { _ = env.Close() }()
	done := make(chan struct{})
	failed := make(chan error, 1)
	var count atomic.Int64
	k, err := env.NewConsumer(name, func(_ native.ConsumerContext, m *namqp.Message) {
		if work != nil {
			if err := work(m); err != nil {
				select {
				case failed <- err:
				default:
				}
				return
			}
		}
		if count.Add(1) == int64(n) {
			close(done)
		}
	}, native.NewConsumerOptions().SetOffset(native.OffsetSpecification{}.First()).SetConsumerName("bench-native"))
	if err != nil {
		return err
	}
	defer func() { _ = k.Close() }()
	select {
	case <-done:
		return nil
	case err := <-failed:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("read %d of %d in %v", count.Load(), n, timeout)
	}
}
