package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
)

type placed struct {
	ID string `json:"id"`
}

// relayIn starts a relay on the harness's Conn over a fresh SQLite outbox
// (pure Go: nothing in the bubble waits on the network), stopped when
// the test ends, and tracked by the harness.
func relayIn(t *testing.T, h *acemqtest.Harness, opts ...RelayOption) (*Store, *Relay) {
	t.Helper()
	s := newStore(t, backend{Name: "sqlite", Open: dbtest.SQLite})
	r, err := NewRelay(h.Conn(), s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("closing the relay: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("the relay's Run: %v", err)
		}
	})
	h.Track(r)
	return s, r
}

// commit adds the orders to the outbox in one transaction, as a service
// does with its own writes.
func commit(t *testing.T, h *acemqtest.Harness, s *Store, key string, ids ...string) {
	t.Helper()
	tx, err := s.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := s.Add(t.Context(), tx, h.Conn(), "orders", key, placed{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestTheRelayPublishesWhatCommittedUnderTheHarness: Settle waits for the
// relay (a tracked part) through its poll, and the records show the
// relay's publishes in their sequence and their consumption.
func TestTheRelayPublishesWhatCommittedUnderTheHarness(t *testing.T) {
	topo := acemq.NewTopology().
		Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
		Queue("orders.new", acemq.QueueOptions{}).
		Bind("orders.new", "orders", "order.*")
	acemqtest.Run(t, acemqtest.Config{Topology: topo}, func(t *testing.T, h *acemqtest.Harness) {
		s, r := relayIn(t, h)
		if _, err := acemq.Consume(t.Context(), h.Conn(), "orders.new", func(ctx context.Context, m *acemq.Message[placed]) acemq.Decision {
			return acemq.Accept()
		}, acemq.ConsumerConfig{}); err != nil {
			t.Fatal(err)
		}
		commit(t, h, s, "order.placed", "o-1", "o-2", "o-3")
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		pub := h.Expect(t, acemqtest.Published, 3, acemqtest.Exchange("orders"), acemqtest.Type("order.placed"))
		for i, want := range []string{"o-1", "o-2", "o-3"} {
			if !strings.Contains(string(pub[i].Body), want) {
				t.Errorf("publish %d carried %s, want %s: the relay keeps the sequence", i+1, pub[i].Body, want)
			}
		}
		h.Expect(t, acemqtest.Acked, 3, acemqtest.Queue("orders.new"))
		if n, _, err := r.Pending(t.Context()); err != nil || n != 0 {
			t.Fatalf("the relay has %d records left (%v)", n, err)
		}
	})
}

// TestTheRelaysOutageBackOffUnderTheHarness: with no queue bound for
// the records' key the relay is held at the first record, trying again
// with back-off (the interval doubling, at most 30 s) without spending an
// attempt; Settle's error names the records it still holds. Once a queue
// is bound the relay publishes them within one back-off step.
func TestTheRelaysOutageBackOffUnderTheHarness(t *testing.T) {
	topo := acemq.NewTopology().Exchange("orders", acemq.Topic, acemq.ExchangeOptions{})
	acemqtest.Run(t, acemqtest.Config{Topology: topo}, func(t *testing.T, h *acemqtest.Harness) {
		s, r := relayIn(t, h)
		commit(t, h, s, "order.paid", "o-1", "o-2")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		err := h.Settle(ctx)
		var ue *acemqtest.UnsettledError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "2 outbox records relay "+r.ID()+" has not published yet") {
			t.Fatalf("Settle: %v, want the two held records named", err)
		}
		if r.Held() == nil {
			t.Fatal("the relay says it is not held")
		}
		tries := len(h.Records().Of(acemqtest.Published, acemqtest.Type("order.paid")))
		// 10 minutes: 1, 2, 4, 8, 16 s, then every 30 s.
		if tries < 20 || tries > 25 {
			t.Errorf("the relay tried %d times in 10 minutes, want about 23 (back-off to 30 s)", tries)
		}
		if err := h.Conn().Apply(t.Context(), acemq.NewTopology().
			Exchange("orders", acemq.Topic, acemq.ExchangeOptions{}).
			Queue("orders.paid", acemq.QueueOptions{}).
			Bind("orders.paid", "orders", "order.paid")); err != nil {
			t.Fatal(err)
		}
		bound := h.Now()
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		out := h.Expect(t, acemqtest.Published, 2, acemqtest.Queue("orders.paid"))
		if wait := out[0].At.Sub(bound); wait > 30*time.Second {
			t.Errorf("published %s after the queue was bound, more than one back-off step", wait)
		}
		if r.Held() != nil {
			t.Errorf("still held: %v", r.Held())
		}
	})
}
