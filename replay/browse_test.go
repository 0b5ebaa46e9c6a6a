package replay_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

func TestBrowseReturnsEveryMessageInOrderWithTheRedeliveredFlag(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 5)
		dlq := acemq.DeadLetterQueue(q)
		var seen []string
		n, err := replay.Browse(context.Background(), c, dlq, 100, func(m *acemq.Pulled) bool {
			seen = append(seen, m.Envelope.ID)
			if len(seen) == 2 {
				// A message arriving while the pass holds the head stays
				// behind the ones it returns.
				if _, err := c.Publish(context.Background(), "", dlq, job{N: 99}); err != nil {
					t.Error(err)
				}
			}
			return true
		})
		if err != nil || n != 5 || !slices.Equal(seen, ids) {
			t.Fatalf("Browse read %d %v (err %v), want %v", n, seen, err, ids)
		}
		got := drain(t, c, dlq)
		if len(got) != 6 {
			t.Fatalf("%d messages after browsing, want 6", len(got))
		}
		for i, m := range got[:5] {
			if m.Envelope.ID != ids[i] || !m.Redelivered {
				t.Fatalf("message %d: id %s redelivered %v, want %s redelivered", i, m.Envelope.ID, m.Redelivered, ids[i])
			}
		}
		if got[5].Redelivered {
			t.Fatal("the message that arrived during the browse is marked redelivered")
		}
	})
}

func TestBrowseStopsAtTheLimitOrWhenVisitSaysSo(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 4)
		dlq := acemq.DeadLetterQueue(q)
		n, err := replay.Browse(context.Background(), c, dlq, 2, nil)
		if err != nil || n != 2 {
			t.Fatalf("limit 2: %d %v", n, err)
		}
		n, err = replay.Browse(context.Background(), c, dlq, 10, func(m *acemq.Pulled) bool { return m.Envelope.ID != ids[2] })
		if err != nil || n != 3 {
			t.Fatalf("stop at the third: %d %v", n, err)
		}
		if got := drain(t, c, dlq); len(got) != 4 || got[0].Envelope.ID != ids[0] || got[3].Envelope.ID != ids[3] {
			t.Fatalf("after browsing: %d messages", len(got))
		}
		if _, err := replay.Browse(context.Background(), c, "no.such.queue.dlq", 1, nil); err == nil {
			t.Fatal("Browse of a missing queue did not fail")
		}
	})
}

func TestSourceOfAndIsSetAside(t *testing.T) {
	for q, want := range map[string]string{"orders.dlq": "orders", "orders.parked": "orders", "a.dlq.parked": "a.dlq", "orders": "orders"} {
		if got := replay.SourceOf(q); got != want {
			t.Errorf("SourceOf(%q) = %q, want %q", q, got, want)
		}
	}
	if !replay.IsSetAside("x.dlq") || !replay.IsSetAside("x.parked") || replay.IsSetAside("x.dlqs") {
		t.Error("IsSetAside")
	}
}

// When Browse (or a replay that declined messages) returns, the broker
// has the messages back: a count taken on another channel right after (as
// a replay's budget is, or a purge) sees them all.
func TestBrowseReturnsBeforeTheNextReaderCounts(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		const n = 600
		c := connect(t, url)
		q, _ := setup(t, c, 0)
		dlq := acemq.DeadLetterQueue(q)
		ctx := context.Background()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: dlq, ContentType: "application/json", Body: []byte(`{}`)}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if read, err := replay.Browse(ctx, c, dlq, n, nil); err != nil || read != n {
			t.Fatalf("Browse read %d (%v), want %d", read, err, n)
		}
		if got := count(t, c, dlq); got != n {
			t.Fatalf("right after Browse the broker counts %d in %s, want %d", got, dlq, n)
		}
		// The same holds for the messages a replay's filter declined.
		rep, err := replay.Queue(ctx, c, dlq, replay.Filter(func(acemq.Envelope, []byte) bool { return false }))
		if err != nil || rep.Skipped != n {
			t.Fatalf("replay declining every message: %+v %v", rep, err)
		}
		if got := count(t, c, dlq); got != n {
			t.Fatalf("right after the replay the broker counts %d in %s, want %d", got, dlq, n)
		}
	})
}
