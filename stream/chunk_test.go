package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
	"github.com/acemq-go/acemq/stream/internal/testenv"
)

// TestAChunkPastThePrefetchIsReadThrough: RabbitMQ delivers a stream chunk
// whole, past the consumer's prefetch, and a batch publish writes one
// chunk. The root consumer's reader used to block on its full hand-off
// channel while holding the mutex its worker needed, so the reader
// stopped after one message (found by BenchmarkStreamReadRabbitMQ).
func TestAChunkPastThePrefetchIsReadThrough(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := brokertest.Connect(t, url)
	ctx := context.Background()
	s := testenv.Unique("stream.chunk")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(s, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, q := range []string{s, acemq.DeadLetterQueue(s), acemq.ParkedQueue(s)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	})
	const n = 500
	batch := make([]acemq.RawMessage, n)
	for i := range batch {
		env := acemq.NewEnvelope()
		batch[i] = acemq.RawMessage{RoutingKey: s, ContentType: "application/json", MessageID: env.ID,
			Headers: env.WireHeaders(), Body: []byte(`{"n":1}`)}
	}
	for _, err := range c.PublishRawBatch(ctx, batch) {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan int64, n)
	r, err := stream.Read(ctx, c, s, "chunk-reader", func(_ context.Context, m *stream.Message[map[string]int]) acemq.Decision {
		got <- m.Offset
		return acemq.Accept()
	}, stream.From(stream.First()), stream.Prefetch(10), stream.LagProbe(0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	want := int64(-1)
	for i := 0; i < n; i++ {
		select {
		case off := <-got:
			if want >= 0 && off != want {
				t.Fatalf("message %d has offset %d, want %d (in order, no gap)", i, off, want)
			}
			want = off + 1
		case <-time.After(20 * time.Second):
			t.Fatalf("the reader handled %d of %d messages written in one batch, then nothing for 20 s", i, n)
		}
	}
}
