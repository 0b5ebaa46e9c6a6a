package acemq_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// BenchmarkSend measures the client's cost of one confirmed Send on
// memory://, from parallel goroutines: envelope, headers, encoding, permit,
// write, confirm.
func BenchmarkSend(b *testing.B) {
	benchSend(b, "bench-send", make([]byte, 256), acemq.PublisherConfig{Codec: acemq.Bytes()})
}

// benchSend sends v from 8 goroutines per core through a publisher made
// with opts, on a fresh memory:// broker whose queue keeps 1000 messages.
func benchSend[T any](b *testing.B, broker string, v T, opts ...acemq.PublisherConfig) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://%s-%d", broker, b.N), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": int64(1000)}})); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[T](c, "", "bench", brokertest.First(opts))
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := pub.Send(ctx, v); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSendAll measures one goroutine's SendAll of 1000 messages.
func BenchmarkSendAll(b *testing.B) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://bench-sendall-%d", b.N), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": int64(1000)}})); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[[]byte](c, "", "bench", acemq.PublisherConfig{Codec: acemq.Bytes()})
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = make([]byte, 256)
	}
	var msgs atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := pub.SendAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
		msgs.Add(int64(len(batch)))
	}
	b.ReportMetric(float64(msgs.Load())/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkConsume measures the client's cost per delivery on memory://:
// envelope read, decode, handler, settlement and ack. The queue is filled
// in rounds of consumeRound messages with the timer stopped, and each
// round consumed with it running, so the heap stays the size a consumer
// has in service. See BenchmarkConsumeBacklog for one backlog of b.N.
func BenchmarkConsume(b *testing.B) {
	benchConsume(b, "bench-consume", consumeRound, func(int) []byte { return make([]byte, 256) }, acemq.PublisherConfig{Codec: acemq.Bytes()}, acemq.ConsumerConfig{Codec: acemq.Bytes()})
}

// BenchmarkConsumeBacklog is BenchmarkConsume with all b.N messages
// queued before the timer starts, as BenchmarkConsume was measured before:
// the in-process broker then holds about 1 KiB per queued message in the
// benchmark's own heap, so the run pays for page faults on fresh memory
// while the heap grows past it, and for marking it, more than for the
// client (how much depends on what earlier runs left mapped; issue 16's
// "bimodal" figures).
func BenchmarkConsumeBacklog(b *testing.B) {
	benchConsume(b, "bench-consume-backlog", 0, func(int) []byte { return make([]byte, 256) }, acemq.PublisherConfig{Codec: acemq.Bytes()}, acemq.ConsumerConfig{Codec: acemq.Bytes()})
}

// consumeRound is how many messages BenchmarkConsume queues at a time.
const consumeRound = 20000

// benchConsume times one consumer (prefetch 250, made with copts) taking
// and acking at least b.N messages made by item on a fresh memory:// queue,
// which it fills (in batches of 1000, timer stopped) round messages at a
// time; round 0 fills it with all of them first.
func benchConsume[T any](b *testing.B, broker string, round int, item func(i int) T, popts acemq.PublisherConfig, copts acemq.ConsumerConfig) {
	copts.Prefetch = 250
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://%s-%d", broker, b.N), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[T](c, "", "bench", popts)
	batch := make([]T, 1000)
	for i := range batch {
		batch[i] = item(i)
	}
	total := (b.N + len(batch) - 1) / len(batch) * len(batch)
	if round <= 0 || round > total {
		round = total
	}
	fill := func(n int) {
		for sent := 0; sent < n; sent += len(batch) {
			if _, err := pub.SendAll(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The handler signals the end of each round (every multiple of round,
	// and the last message) and, but for the last, waits there until the
	// next round is queued, so nothing is consumed while the timer is
	// stopped.
	var got atomic.Int64
	roundDone, resume := make(chan struct{}), make(chan struct{})
	b.StopTimer()
	fill(min(round, total))
	b.ReportAllocs()
	b.ResetTimer()
	b.StartTimer()
	cons, err := acemq.Consume(ctx, c, "bench", func(ctx context.Context, m *acemq.Message[T]) acemq.Decision {
		if n := got.Add(1); n%int64(round) == 0 || n == int64(total) {
			roundDone <- struct{}{}
			if n < int64(total) {
				<-resume
			}
		}
		return acemq.Accept()
	}, copts)
	if err != nil {
		b.Fatal(err)
	}
	for queued := min(round, total); ; {
		<-roundDone
		if queued >= total {
			break
		}
		b.StopTimer()
		n := min(round, total-queued)
		fill(n)
		queued += n
		b.StartTimer()
		resume <- struct{}{}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msg/s")
	_ = cons.Close(ctx)
}

// benchItem is the small struct of the JSON-codec benchmarks.
type benchItem struct {
	ID    string `json:"id"`
	Qty   int    `json:"qty"`
	Price int64  `json:"price"`
}

// BenchmarkSendJSON is BenchmarkSend with the JSON codec and a small
// struct, reported beside the Bytes figures (issue 16).
func BenchmarkSendJSON(b *testing.B) {
	benchSend(b, "bench-send-json", benchItem{ID: "item-1", Qty: 3, Price: 1299})
}

// BenchmarkConsumeJSON is BenchmarkConsume with the JSON codec and a
// small struct.
func BenchmarkConsumeJSON(b *testing.B) {
	benchConsume(b, "bench-consume-json", consumeRound, func(i int) benchItem { return benchItem{ID: "item-1", Qty: i, Price: 1299} }, acemq.PublisherConfig{}, acemq.ConsumerConfig{})
}
