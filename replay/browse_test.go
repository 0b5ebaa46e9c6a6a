package replay_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
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
				if _, err := c.Publish(context.Background(), "", dlq, job{N: 99}, acemq.SendOptions{}); err != nil {
					t.Error(err)
				}
			}
			return true
		}, manage(c))
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
		n, err := replay.Browse(context.Background(), c, dlq, 2, nil, manage(c))
		if err != nil || n != 2 {
			t.Fatalf("limit 2: %d %v", n, err)
		}
		n, err = replay.Browse(context.Background(), c, dlq, 10, func(m *acemq.Pulled) bool { return m.Envelope.ID != ids[2] }, manage(c))
		if err != nil || n != 3 {
			t.Fatalf("stop at the third: %d %v", n, err)
		}
		if got := drain(t, c, dlq); len(got) != 4 || got[0].Envelope.ID != ids[0] || got[3].Envelope.ID != ids[3] {
			t.Fatalf("after browsing: %d messages", len(got))
		}
		if _, err := replay.Browse(context.Background(), c, "no.such.queue.dlq", 1, nil, manage(c)); err == nil {
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
		if read, err := replay.Browse(ctx, c, dlq, n, nil, manage(c)); err != nil || read != n {
			t.Fatalf("Browse read %d (%v), want %d", read, err, n)
		}
		if got := count(t, c, dlq); got != n {
			t.Fatalf("right after Browse the broker counts %d in %s, want %d", got, dlq, n)
		}
		// The same holds for the messages a replay's filter declined.
		rep, err := replay.Queue(ctx, c, dlq, replay.Filter(func(acemq.Envelope, []byte) bool { return false }), manage(c))
		if err != nil || rep.Skipped != n {
			t.Fatalf("replay declining every message: %+v %v", rep, err)
		}
		if got := count(t, c, dlq); got != n {
			t.Fatalf("right after the replay the broker counts %d in %s, want %d", got, dlq, n)
		}
	})
}

// browseIDs reads the whole of queue with Browse and returns the message
// ids in the order visited and whether each was marked redelivered.
func browseIDs(t *testing.T, c *acemq.Conn, queue string) ([]string, []bool) {
	t.Helper()
	var ids []string
	var redelivered []bool
	if _, err := replay.Browse(context.Background(), c, queue, 1<<30, func(m *acemq.Pulled) bool {
		ids = append(ids, m.Envelope.ID)
		redelivered = append(redelivered, m.Redelivered)
		return true
	}, manage(c)); err != nil {
		t.Fatal(err)
	}
	return ids, redelivered
}

// fill publishes n messages to queue in one ordered batch; their ids are
// prefix-00000, prefix-00001, ...
func fill(t *testing.T, c *acemq.Conn, queue, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	ms := make([]acemq.RawMessage, n)
	for i := range ms {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		env := acemq.NewEnvelope()
		env.ID, env.Error = ids[i], "exhausted 3 attempts: boom"
		ms[i] = acemq.RawMessage{RoutingKey: queue, ContentType: "application/json", MessageID: ids[i], Headers: env.WireHeaders(), Body: []byte(`{}`)}
	}
	for i, err := range c.PublishRawBatch(context.Background(), ms) {
		if err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
	}
	return ids
}

// The order after a browse equals the order before it, on classic and
// quorum queues, when the read spans several subscriptions (windows of
// 500), when it stops half way through a window, and with a message
// arriving while the pass holds the head. A second pass sees every
// message redelivered, in the same order, and the late one last.
func TestBrowseKeepsTheOrderOnClassicAndQuorumQueues(t *testing.T) {
	defer replay.SetBrowseWindow(500)()
	const n = 2000
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		for _, kind := range []struct {
			name string
			opt  acemq.QueueOptions
		}{{"classic", acemq.QueueOptions{Type: acemq.Classic}}, {"quorum", acemq.QueueOptions{Type: acemq.Quorum}}} {
			t.Run(kind.name, func(t *testing.T) {
				ctx := context.Background()
				q := testenv.Unique("replay.order."+kind.name) + ".dlq"
				if kind.opt.Type == acemq.Quorum && strings.HasPrefix(url, "amqp") && testenv.RabbitMajor(t) >= 4 {
					// RabbitMQ 4's default delivery limit would make the
					// read refuse (TestBrowseRefusesWhereAReadCounts...).
					kind.opt.DeliveryLimit = -1
				}
				if err := c.Apply(ctx, acemq.NewTopology().Queue(q, kind.opt)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), q) })
				ids := fill(t, c, q, "m", n)

				// A first pass reads 750 (one full window, half of the
				// next); a message arrives while it holds them.
				var seen []string
				read, err := replay.Browse(ctx, c, q, n, func(m *acemq.Pulled) bool {
					seen = append(seen, m.Envelope.ID)
					if len(seen) == 10 {
						fill(t, c, q, "late", 1)
					}
					return len(seen) < 750
				}, manage(c))
				if err != nil || read != 750 || !slices.Equal(seen, ids[:750]) {
					t.Fatalf("first pass read %d (err %v); in order: %v", read, err, slices.Equal(seen, ids[:min(len(seen), 750)]))
				}
				// The whole queue, twice: the order stays that of the publish.
				for pass := range 2 {
					got, redelivered := browseIDs(t, c, q)
					want := append(slices.Clone(ids), "late-00000")
					if !slices.Equal(got, want) {
						i := 0
						for i < min(len(got), len(want)) && got[i] == want[i] {
							i++
						}
						t.Fatalf("pass %d read %d messages, want %d; first difference at %d: %v vs %v", pass+2, len(got), len(want), i, got[i:min(i+5, len(got))], want[i:min(i+5, len(want))])
					}
					for i, r := range redelivered {
						// The first pass took 0..749 and the broker had sent
						// it the rest of its second window (to 999): those
						// come back redelivered. The second pass took all.
						switch {
						case pass == 1 || i < 750:
							if !r {
								t.Fatalf("pass %d: message %d (%s) is not marked redelivered", pass+2, i, got[i])
							}
						case i >= 1000:
							if r {
								t.Fatalf("pass %d: message %d (%s), never taken before, is marked redelivered", pass+2, i, got[i])
							}
						}
					}
				}
				if got := count(t, c, q); got != n+1 {
					t.Fatalf("%s counts %d after browsing, want %d", q, got, n+1)
				}
			})
		}
	})
}

// When something else takes messages while Browse reads, Browse stops
// once the queue has none ready, returns what it held, and does not wait
// for messages that will never come.
func TestBrowseStopsWhenSomethingElseEmptiesTheQueue(t *testing.T) {
	defer replay.SetBrowseWindow(2)()
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, _ := setup(t, c, 0)
		dlq := acemq.DeadLetterQueue(q)
		ids := fill(t, c, dlq, "m", 6)
		ctx := context.Background()
		var seen []string
		read, err := replay.Browse(ctx, c, dlq, 10, func(m *acemq.Pulled) bool {
			seen = append(seen, m.Envelope.ID)
			if len(seen) == 2 {
				// The first window holds 0 and 1 (prefetch 2), so the broker
				// has not sent 2 and 3: another reader takes them.
				for _, want := range ids[2:4] {
					if got := pullOne(t, c, dlq); got != want {
						t.Errorf("the other reader took %s, want %s", got, want)
					}
				}
			}
			return true
		}, manage(c))
		if err != nil || read != 4 || !slices.Equal(seen, []string{ids[0], ids[1], ids[4], ids[5]}) {
			t.Fatalf("Browse read %d %v (err %v)", read, seen, err)
		}
		got := drain(t, c, dlq)
		if len(got) != 4 || got[0].Envelope.ID != ids[0] || got[1].Envelope.ID != ids[1] || got[2].Envelope.ID != ids[4] || got[3].Envelope.ID != ids[5] {
			t.Fatalf("after browsing the queue holds %d messages", len(got))
		}
	})
}

// pullOne takes and acknowledges the head of queue and returns its id.
func pullOne(t *testing.T, c *acemq.Conn, queue string) string {
	t.Helper()
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, ok, err := p.Pull(context.Background(), queue)
	if err != nil || !ok {
		t.Fatalf("pull from %s: ok %v err %v", queue, ok, err)
	}
	if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
	return m.Envelope.ID
}

// On a single-active-consumer queue whose active consumer is another
// reader, no message reaches Browse: it fails saying why instead of
// waiting for ever, and every message is still there.
func TestBrowseFailsWhenAnotherConsumerHoldsTheQueue(t *testing.T) {
	defer replay.SetBrowseStall(time.Second)()
	c := connect(t, testenv.AMQPURL(t))
	ctx := context.Background()
	q := testenv.Unique("replay.sac") + ".dlq"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-single-active-consumer": true}})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), q) })
	fill(t, c, q, "m", 5)
	ch, err := c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(1); err != nil {
		t.Fatal(err)
	}
	active, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: q, Tag: "active"})
	if err != nil {
		t.Fatal(err)
	}
	select { // it holds one; four stay ready
	case <-active:
	case <-time.After(10 * time.Second):
		t.Fatal("the active consumer got no message")
	}
	_, err = replay.Browse(ctx, c, q, 10, nil, manage(c))
	if err == nil || !strings.Contains(err.Error(), "another consumer holds the queue") {
		t.Fatalf("Browse beside an active consumer: %v", err)
	}
	if got := count(t, c, q); got != 4 {
		t.Fatalf("%s counts %d ready after the failed read, want 4", q, got)
	}
	_ = ch.Close()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, c, q) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never counted its 5 messages again", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A visit that panics loses nothing: the channel closes on the way out
// and the broker has every message back. Settling a view is refused with
// an error (it used to panic on a nil Puller).
func TestBrowseReturnsEverythingWhenVisitPanics(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 3)
		dlq := acemq.DeadLetterQueue(q)
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the visit's panic did not reach the caller")
				}
			}()
			_, _ = replay.Browse(context.Background(), c, dlq, 10, func(m *acemq.Pulled) bool {
				if err := m.Ack(); err == nil {
					t.Error("acking a view returned nil, want an error")
				}
				panic("the visit panics")
			}, manage(c))
		}()
		deadline := time.Now().Add(10 * time.Second)
		for count(t, c, dlq) != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("%s counts %d after a panicking browse, want 3", dlq, count(t, c, dlq))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := drain(t, c, dlq); len(got) != 3 || got[0].Envelope.ID != ids[0] || got[2].Envelope.ID != ids[2] {
			t.Fatalf("after a panicking browse the queue holds %d messages", len(got))
		}
	})
}

// memory:// counts as RabbitMQ 4.3 does: a closed channel counts toward a
// quorum queue's delivery limit, a basic.nack does not. So a read hands
// messages back there by nack: browsing a quorum queue with a delivery
// limit of 1 three times leaves its message where it was, uncounted
// (closing the channel, the second read dead-lettered it).
func TestBrowsingTheInProcessBrokerMovesNothingTowardADeliveryLimit(t *testing.T) {
	c := connect(t, "memory://"+memName(t))
	ctx := context.Background()
	q := "limited.dlq"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, DeliveryLimit: 1})); err != nil {
		t.Fatal(err)
	}
	ids := fill(t, c, q, "m", 1)
	for pass := range 3 {
		got, _ := browseIDs(t, c, q)
		if !slices.Equal(got, ids) {
			t.Fatalf("pass %d read %v, want %v: the read moved the message toward its delivery limit", pass+1, got, ids)
		}
	}
	var counted any
	if _, err := replay.Browse(ctx, c, q, 1, func(m *acemq.Pulled) bool { counted = m.Headers["x-delivery-count"]; return true }); err != nil {
		t.Fatal(err)
	}
	if counted != nil {
		t.Fatalf("after three reads the message carries x-delivery-count %v, want none", counted)
	}
}
