package outbox

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/brokertest"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/outbox/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// The reproduction: a queue full with x-overflow reject-publish
// (its consumer down) nacks every publish. Three records, created, paid,
// shipped, used to spend an attempt per nacked sweep, one a second: the
// first was retired after about 9 s and the consumer, once back, saw the
// later ones without it. A full queue is the broker's state, not the
// record's fault: the relay spends no attempt, is held at the first record
// with back-off (Health says why) and, once the consumer drains the queue,
// every record arrives, the last copies in order.
func TestAFullQueueHoldsTheRelayWithoutSpendingAttemptsOrLosingTheOrder(t *testing.T) {
	run := func(t *testing.T, url string, b backend) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		s := newStore(t, b)
		q := testenv.Unique("outbox.full")
		if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{
			"x-max-length": int64(1), "x-overflow": "reject-publish",
		}})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), q) })
		if _, err := c.Publish(ctx, "", q, order{"filler", 0}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		sent := add(t, s, c, "", q, order{"created", 1}, order{"paid", 2}, order{"shipped", 3})

		var refused atomic.Int32
		r := newRelay(t, c, s, WithInterval(5*time.Millisecond), WithObserver(func(sw Sweep) {
			if sw.Err != nil {
				refused.Add(1)
			}
		}))
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		t.Cleanup(func() { _ = r.Close(context.Background()); <-ran })

		brokertest.Eventually(t, "twice as many refused sweeps as MaxAttempts", func() bool { return refused.Load() >= 2*MaxAttempts })
		if ret, err := s.Retired(ctx); err != nil || len(ret) != 0 {
			t.Fatalf("retired %+v %v: a full queue must not retire a record", ret, err)
		}
		p, err := s.Pending(ctx, 0)
		if err != nil || len(p) != 3 {
			t.Fatalf("pending %+v %v", p, err)
		}
		for _, rec := range p {
			if rec.Attempts != 0 {
				t.Fatalf("record %s spent %d attempts on a full queue", rec.ID, rec.Attempts)
			}
		}
		h := r.Health(ctx)
		if h.Status != acemq.StatusDegraded || !strings.Contains(h.Detail, "held at record "+sent[0]) || !strings.Contains(h.Detail, "no attempt") {
			t.Fatalf("health %+v, want DEGRADED naming record %s", h, sent[0])
		}

		// The consumer comes back and drains the queue.
		var mu sync.Mutex
		var got []string
		k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
			mu.Lock()
			defer mu.Unlock()
			if m.Payload.ID != "filler" {
				got = append(got, m.Envelope.ID)
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		brokertest.Eventually(t, "the outbox published", func() bool {
			p, err := s.Pending(ctx, 0)
			return err == nil && len(p) == 0
		})
		brokertest.Eventually(t, "the three records consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(lastCopies(got)) == 3
		})
		mu.Lock()
		last := lastCopies(got)
		mu.Unlock()
		if !slices.Equal(last, sent) {
			t.Fatalf("consumed %v (last copies %v), want %v", got, last, sent)
		}
		brokertest.Eventually(t, "the relay's health back up", func() bool { return r.Health(ctx).Status == acemq.StatusUp })
	}
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		run(t, url, backend{Name: "sqlite", Open: dbtest.SQLite})
	})
	forEachServerBackend(t, func(t *testing.T, b backend) { run(t, "memory://"+dbtest.RandHex(6), b) })
}
