package idempotency

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency/internal/brokertest"
	"github.com/acemq-go/acemq/schedule"
)

// A scheduled message whose control message the scheduler reads twice (it
// crashed after the delivery's confirm, before its ack) reaches its target
// twice with one id, so Guard runs the handler once and accepts the
// repeat. Before, each delivery had a fresh id and both ran.
func TestGuardSkipsTheRepeatOfARedeliveredScheduledMessage(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		s, err := schedule.Start(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		q := brokertest.Queue(t, c, "guard.scheduled")

		var ran, accepted atomic.Int32
		store := NewMemoryStore()
		k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
			dec := Guard(store, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
				ran.Add(1)
				return acemq.Accept()
			})(ctx, m)
			accepted.Add(1)
			return dec
		}, acemq.ConsumerConfig{Codec: acemq.Text()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })

		// The control message as the scheduler reads it when it is due,
		// twice.
		env := acemq.NewEnvelope()
		env.ID = "reminder-" + strings.ReplaceAll(t.Name(), "/", "-")
		env.Type = schedule.MessageType
		h := env.WireHeaders()
		h[schedule.HeaderExchange], h[schedule.HeaderRoutingKey] = "", q
		h[schedule.HeaderDueAt] = time.Now().UnixMilli()
		h[schedule.HeaderContentType] = "text/plain; charset=utf-8"
		for range 2 {
			if err := c.PublishRaw(ctx, acemq.RawMessage{Exchange: schedule.Exchange, RoutingKey: schedule.DueQueue,
				ContentType: "application/octet-stream", MessageID: env.ID, Headers: h, Body: []byte("call the customer")}); err != nil {
				t.Fatal(err)
			}
		}
		brokertest.Eventually(t, "both deliveries handled", func() bool { return accepted.Load() == 2 })
		if n := ran.Load(); n != 1 {
			t.Fatalf("the guarded handler ran %d times for one scheduled message delivered twice, want 1", n)
		}
	})
}
