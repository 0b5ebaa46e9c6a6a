package acemq

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// refuse+memory:// is memory:// whose consumes on chosen queues are
// refused, the way RabbitMQ refuses a stream consumer on a node where the
// stream's replica has not started yet after a partition (406 on the
// channel; the connection stays up).
func init() { transport.Register("refuse+memory", consumeRefusingDialer{}) }

// consumeRefusals is, per broker, how many more consumes to refuse on each
// queue.
var consumeRefusals sync.Map // broker name → *refusals

type refusals struct {
	mu   sync.Mutex
	left map[string]int
	seen atomic.Int32 // consumes refused so far
}

func (r *refusals) take(queue string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left[queue] > 0 {
		r.left[queue]--
		r.seen.Add(1)
		return true
	}
	return false
}

type consumeRefusingDialer struct{}

func (consumeRefusingDialer) Name() string           { return memory.Driver{}.Name() }
func (consumeRefusingDialer) Capabilities() []string { return memory.Driver{}.Capabilities() }

func (consumeRefusingDialer) Dial(ctx context.Context, cfg transport.Config) (transport.Connection, int, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, 0, err
	}
	name := u.Host
	u.Scheme = "memory"
	cfg.URL = u.String()
	c, frameMax, err := memory.Driver{}.Dial(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	return consumeRefusingConn{Connection: c, broker: name}, frameMax, nil
}

type consumeRefusingConn struct {
	transport.Connection
	broker string
}

func (c consumeRefusingConn) Channel(ctx context.Context) (transport.Channel, error) {
	ch, err := c.Connection.Channel(ctx)
	if err != nil {
		return nil, err
	}
	return consumeRefusingChannel{Channel: ch, broker: c.broker}, nil
}

type consumeRefusingChannel struct {
	transport.Channel
	broker string
}

func (ch consumeRefusingChannel) Consume(ctx context.Context, spec transport.ConsumeSpec) (<-chan transport.Delivery, error) {
	if v, ok := consumeRefusals.Load(ch.broker); ok && v.(*refusals).take(spec.Queue) {
		_ = ch.Channel.Close()
		return nil, &transport.Error{Code: transport.CodePreconditionFailed, Reason: "PRECONDITION_FAILED - queue '" + spec.Queue + "' does not have a replica on the local node", Server: true}
	}
	return ch.Channel.Consume(ctx, spec)
}

// After a lost connection, a consumer the broker refuses on its own
// channel (here 406, as a stream without a replica on the node yet) is
// left to its re-subscriber: the recovery completes at its first attempt,
// the other consumer and publishing work at once, and the refused one
// reads again when the broker lets it. Before, the refusal ended every
// recovery attempt until the broker stopped refusing (seen in the
// partition drill's node logs: a stream reader refused on a node just
// restarted after a partition took its whole client down again).
func TestARefusedReattachDoesNotHoldUpTheRecovery(t *testing.T) {
	const name = "reattach-refused"
	r := &refusals{left: map[string]int{}}
	consumeRefusals.Store(name, r)
	t.Cleanup(func() { consumeRefusals.Delete(name); memory.Delete(name) })

	recovered := make(chan int, 4)
	c, err := Connect(context.Background(), "refuse+memory://"+name, Config{
		Logger:           slog.New(slog.DiscardHandler),
		RecoveryInterval: 5 * time.Millisecond,
		OnEvent: func(e Event) {
			if e.Kind == EventRecovered {
				recovered <- e.Attempt
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := context.Background()
	if err := c.Apply(ctx, NewTopology().Queue("healthy", QueueOptions{Type: Classic}).Queue("refused", QueueOptions{Type: Classic})); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	for _, q := range []string{"healthy", "refused"} {
		k, err := Consume(ctx, c, q, func(_ context.Context, m *Message[string]) Decision {
			got <- q + ":" + m.Payload
			return Accept()
		}, ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
	}

	// The broker refuses the next consumes on "refused" (the recovery's
	// and the re-subscriber's first ones), then lets it in.
	const refuse = 3
	r.mu.Lock()
	r.left["refused"] = refuse
	r.mu.Unlock()
	memory.Lookup(name).DropConnections()

	select {
	case n := <-recovered:
		if n != 1 {
			t.Fatalf("recovered at attempt %d; a consumer's refusal held up the recovery (want attempt 1)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no recovery within 10s")
	}
	send := func(q, v string) {
		t.Helper()
		if _, err := NewPublisher[string](c, "", q, PublisherConfig{}).Send(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(want string) {
		t.Helper()
		limit := time.After(10 * time.Second)
		for {
			select {
			case v := <-got:
				if v == want {
					return
				}
			case <-limit:
				t.Fatalf("%s was not consumed within 10s (refusals so far: %d)", want, r.seen.Load())
			}
		}
	}
	send("healthy", "after")
	wait("healthy:after")
	send("refused", "after")
	wait("refused:after")
	if n := r.seen.Load(); n != refuse {
		t.Fatalf("%d consumes refused, want all %d (the re-subscriber tried until the broker let it in)", n, refuse)
	}
	if st := c.Health(ctx).Stalled; slices.Contains(st, "refused") {
		t.Fatalf("still reported stalled after reading again: %v", st)
	}
}
