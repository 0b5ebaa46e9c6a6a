package acemq_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
)

// BenchmarkSend measures the client's cost of one confirmed Send on
// memory://, from parallel goroutines: envelope, headers, encoding, permit,
// write, confirm.
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://bench-send-%d", b.N), acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.AsClassic(), acemq.WithArgs(map[string]any{"x-max-length": int64(1000)}))); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[[]byte](c, "", "bench", acemq.PublisherCodec(acemq.Bytes()))
	body := make([]byte, 256)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := pub.Send(ctx, body); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSendAll measures one goroutine's SendAll of 1000 messages.
func BenchmarkSendAll(b *testing.B) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://bench-sendall-%d", b.N), acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.AsClassic(), acemq.WithArgs(map[string]any{"x-max-length": int64(1000)}))); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[[]byte](c, "", "bench", acemq.PublisherCodec(acemq.Bytes()))
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
// envelope read, decode, handler, settlement and ack.
func BenchmarkConsume(b *testing.B) {
	ctx := context.Background()
	name := fmt.Sprintf("memory://bench-consume-%d", b.N)
	c, err := acemq.Connect(ctx, name, acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.AsClassic())); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[[]byte](c, "", "bench", acemq.PublisherCodec(acemq.Bytes()))
	batch := make([][]byte, 1000)
	for i := range batch {
		batch[i] = make([]byte, 256)
	}
	for sent := 0; sent < b.N; sent += len(batch) {
		if _, err := pub.SendAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	total := (b.N + len(batch) - 1) / len(batch) * len(batch)
	var got atomic.Int64
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	cons, err := acemq.Consume(ctx, c, "bench", func(ctx context.Context, m *acemq.Message[[]byte]) acemq.Decision {
		if got.Add(1) == int64(total) {
			close(done)
		}
		return acemq.Accept()
	}, acemq.ConsumerCodec(acemq.Bytes()), acemq.ConsumerPrefetch(250))
	if err != nil {
		b.Fatal(err)
	}
	<-done
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
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://bench-send-json-%d", b.N), acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.AsClassic(), acemq.WithArgs(map[string]any{"x-max-length": int64(1000)}))); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[benchItem](c, "", "bench")
	item := benchItem{ID: "item-1", Qty: 3, Price: 1299}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := pub.Send(ctx, item); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkConsumeJSON is BenchmarkConsume with the JSON codec and a
// small struct.
func BenchmarkConsumeJSON(b *testing.B) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, fmt.Sprintf("memory://bench-consume-json-%d", b.N), acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("bench", acemq.AsClassic())); err != nil {
		b.Fatal(err)
	}
	pub := acemq.NewPublisher[benchItem](c, "", "bench")
	batch := make([]benchItem, 1000)
	for i := range batch {
		batch[i] = benchItem{ID: "item-1", Qty: i, Price: 1299}
	}
	for sent := 0; sent < b.N; sent += len(batch) {
		if _, err := pub.SendAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	total := (b.N + len(batch) - 1) / len(batch) * len(batch)
	var got atomic.Int64
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	cons, err := acemq.Consume(ctx, c, "bench", func(ctx context.Context, m *acemq.Message[benchItem]) acemq.Decision {
		if got.Add(1) == int64(total) {
			close(done)
		}
		return acemq.Accept()
	}, acemq.ConsumerPrefetch(250))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "msg/s")
	_ = cons.Close(ctx)
}
