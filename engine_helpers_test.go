package acemq_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// waitLimit bounds every wait in these tests; nothing legitimate takes
// this long on memory://.
const waitLimit = 10 * time.Second

var brokerSeq atomic.Int64

// rig is one test's Conn, with every settlement and fallback recorded: on
// a memory broker of its own (newRig), or on the RabbitMQ node of `make
// test` (onEveryRig's "rabbitmq" subtest).
type rig struct {
	t *testing.T
	c *acemq.Conn
	// broker is the memory broker; nil on RabbitMQ, so a test that uses
	// it (a fault RabbitMQ cannot be told to make) runs on memory only.
	broker *memory.Broker
	// name is the memory broker's name.
	name string
	// url is the address the Conn dialled; rabbit says it is RabbitMQ.
	url    string
	rabbit bool
	// made holds the queues this rig named on RabbitMQ, deleted at
	// cleanup with their dead-letter halves and rungs.
	made []string

	mu          sync.Mutex
	settlements []acemq.Settlement
	settled     chan acemq.Settlement
	fallbacks   chan acemq.Fallback
}

// newRig connects to a fresh memory:// broker and closes it at cleanup.
func newRig(t *testing.T, opts ...acemq.Config) *rig {
	t.Helper()
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()) + "-" + itoa(brokerSeq.Add(1))
	name = strings.ToLower(name)
	r := &rig{t: t, name: name, url: "memory://" + name}
	t.Cleanup(func() { memory.Delete(name) }) // after the Conn's Close
	r.connect(opts)
	r.broker = memory.Lookup(name)
	return r
}

// newRabbitRig connects to the RabbitMQ node of `make test` (skipped, or
// failed under ACEMQ_REQUIRE_SERVICES, when it is not running). The queues
// the test names with r.named are deleted at cleanup.
func newRabbitRig(t *testing.T, opts ...acemq.Config) *rig {
	t.Helper()
	return newRabbitRigAt(t, testenv.AMQPURL(t), opts...)
}

// newRabbitRigAt is newRabbitRig dialling url: the node of `make test`
// with transport settings of its own (frames=amqp091, coalesce=off).
func newRabbitRigAt(t *testing.T, url string, opts ...acemq.Config) *rig {
	t.Helper()
	r := &rig{t: t, url: url, rabbit: true}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("ACEMQ_TEST_LOG") == "1" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// Registered before the Conn's own cleanup, so it runs after it.
	t.Cleanup(func() {
		var names []string
		for _, q := range r.made {
			names = append(names, q, q+".dlq", q+".parked", acemq.RetryQueue(q, time.Second))
		}
		if len(names) > 0 {
			deleteQueues(t, names...)
		}
	})
	r.connect(append([]acemq.Config{{Logger: logger}}, opts...))
	return r
}

// connect dials r.url with the rig's hooks and closes the Conn at cleanup.
func (r *rig) connect(opts []acemq.Config) {
	r.t.Helper()
	r.settled = make(chan acemq.Settlement, 1000)
	r.fallbacks = make(chan acemq.Fallback, 1000)
	all := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) {
		r.mu.Lock()
		r.settlements = append(r.settlements, s)
		r.mu.Unlock()
		r.settled <- s
	}, OnFallback: func(f acemq.Fallback) { r.fallbacks <- f },
	}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, r.url, all)
	if err != nil {
		r.t.Fatal(err)
	}
	r.c = c
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = c.Close(ctx)
	})
}

// onEveryRig runs fn with a rig on memory:// and with one on the RabbitMQ
// node of `make test`: the engine's promises do not depend on the broker,
// and memory:// is no kinder than RabbitMQ (as watermill's shared pub/sub
// tests show for every Pub/Sub).
func onEveryRig(t *testing.T, fn func(t *testing.T, r *rig), opts ...acemq.Config) {
	t.Run("memory", func(t *testing.T) { fn(t, newRig(t, opts...)) })
	t.Run("rabbitmq", func(t *testing.T) { fn(t, newRabbitRig(t, opts...)) })
}

// named returns a queue name for prefix no other test uses: prefix itself
// on a memory broker of the test's own, a unique name on RabbitMQ (deleted
// at cleanup with its dead-letter half and its 1s rung).
func (r *rig) named(prefix string) string {
	if !r.rabbit {
		return prefix
	}
	q := testenv.Unique(prefix)
	r.made = append(r.made, q)
	return q
}

// reconnect opens a second Conn to the rig's broker (without the rig's
// hooks), closed at cleanup.
func (r *rig) reconnect(opts ...acemq.Config) *acemq.Conn {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, r.url, brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// nackingQueue declares a classic queue q on which, of the next total
// publishes, nacked are refused by the broker with a nack: on memory the
// first nacked (the broker's fault injection), on RabbitMQ the last nacked
// (a reject-publish queue bounded at total-nacked messages).
func (r *rig) nackingQueue(q string, total, nacked int) {
	r.t.Helper()
	if !r.rabbit {
		r.queue(q)
		r.broker.NackNext(nacked)
		return
	}
	args := map[string]any{"x-max-length": int64(total - nacked), "x-overflow": "reject-publish"}
	if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Args: args})); err != nil {
		r.t.Fatal(err)
	}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// queue declares a classic source queue q (plus anything in extra).
func (r *rig) queue(q string, extra ...func(*acemq.Topology)) {
	r.t.Helper()
	tp := acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})
	for _, f := range extra {
		f(tp)
	}
	if err := r.c.Apply(context.Background(), tp); err != nil {
		r.t.Fatal(err)
	}
}

// send publishes one payload straight to queue q.
func (r *rig) send(q string, p order, opts ...acemq.SendOptions) acemq.Sent {
	r.t.Helper()
	s, err := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{}).SendWith(context.Background(), p, brokertest.First(opts))
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// consume starts a consumer and closes it at cleanup.
func consume[T any](r *rig, q string, h acemq.Handler[T], opts ...acemq.ConsumerConfig) *acemq.Consumer {
	r.t.Helper()
	k, err := acemq.Consume(context.Background(), r.c, q, h, brokertest.First(opts))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = k.Close(ctx)
	})
	return k
}

// nextSettlement waits for the next settlement.
func (r *rig) nextSettlement() acemq.Settlement {
	r.t.Helper()
	select {
	case s := <-r.settled:
		return s
	case <-time.After(waitLimit):
		r.t.Fatal("no settlement arrived")
	}
	return acemq.Settlement{}
}

// nextFallback waits for the next fallback.
func (r *rig) nextFallback() acemq.Fallback {
	r.t.Helper()
	select {
	case f := <-r.fallbacks:
		return f
	case <-time.After(waitLimit):
		r.t.Fatal("no fallback arrived")
	}
	return acemq.Fallback{}
}

// noMoreSettlements asserts that no further settlement arrives within d.
func (r *rig) noMoreSettlements(d time.Duration) {
	r.t.Helper()
	select {
	case s := <-r.settled:
		r.t.Fatalf("unexpected extra settlement %+v", s)
	case <-time.After(d):
	}
}

// pull takes one message from q, waiting until one is there, and acks it.
func (r *rig) pull(q string) *acemq.Pulled {
	r.t.Helper()
	p, err := r.c.NewPuller(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(waitLimit)
	for {
		m, ok, err := p.Pull(context.Background(), q)
		if err != nil {
			r.t.Fatal(err)
		}
		if ok {
			if err := m.Ack(); err != nil {
				r.t.Fatal(err)
			}
			return m
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("nothing arrived in %s", q)
		}
		time.Sleep(2 * time.Millisecond) // polling an empty queue: no event exists
	}
}

// ready returns how many messages are ready in q.
func (r *rig) ready(q string) int {
	r.t.Helper()
	info, ok := r.info(q)
	if !ok {
		r.t.Fatalf("queue %s does not exist", q)
	}
	return info.Messages
}

// info reports q's ready messages and consumers; ok is false when q does
// not exist. On RabbitMQ it asks with a passive declaration on r.c (so not
// after r.c is closed), and any refusal but 404 fails the test.
func (r *rig) info(q string) (transport.QueueInfo, bool) {
	r.t.Helper()
	if !r.rabbit {
		return r.broker.QueueInfo(q)
	}
	info, err := r.c.QueueInfo(context.Background(), q)
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return info, false
		}
		r.t.Fatal(err)
	}
	return info, true
}

// waitReady waits until q holds exactly n ready messages.
func (r *rig) waitReady(q string, n int) {
	r.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		if got := r.ready(q); got == n {
			return
		} else if time.Now().After(deadline) {
			r.t.Fatalf("%s holds %d ready messages, want %d", q, got, n)
		}
		time.Sleep(2 * time.Millisecond) // polling: the broker has no event for it
	}
}

// exists reports whether queue q exists on the broker.
func (r *rig) exists(q string) bool {
	r.t.Helper()
	_, ok := r.info(q)
	return ok
}

// recv waits for a value on ch.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero
}
