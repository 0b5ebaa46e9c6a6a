package acemq_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// waitLimit bounds every wait in these tests; nothing legitimate takes
// this long on memory://.
const waitLimit = 10 * time.Second

var brokerSeq atomic.Int64

// rig is one test's Conn on a memory broker of its own, with every
// settlement and fallback recorded.
type rig struct {
	t      *testing.T
	c      *acemq.Conn
	broker *memory.Broker
	name   string

	mu          sync.Mutex
	settlements []acemq.Settlement
	settled     chan acemq.Settlement
	fallbacks   chan acemq.Fallback
}

// newRig connects to a fresh memory:// broker and closes it at cleanup.
func newRig(t *testing.T, opts ...acemq.Option) *rig {
	t.Helper()
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()) + "-" + itoa(brokerSeq.Add(1))
	name = strings.ToLower(name)
	r := &rig{t: t, name: name, settled: make(chan acemq.Settlement, 1000), fallbacks: make(chan acemq.Fallback, 1000)}
	all := append([]acemq.Option{
		acemq.WithLogger(acemq.DiscardLogger()),
		acemq.WithSettlementHook(func(s acemq.Settlement) {
			r.mu.Lock()
			r.settlements = append(r.settlements, s)
			r.mu.Unlock()
			r.settled <- s
		}),
		acemq.WithFallbackHook(func(f acemq.Fallback) { r.fallbacks <- f }),
	}, opts...)
	c, err := acemq.Connect(context.Background(), "memory://"+name, all...)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	r.broker = memory.Lookup(name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = c.Close(ctx)
		memory.Delete(name)
	})
	return r
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
	tp := acemq.NewTopology().Queue(q, acemq.AsClassic())
	for _, f := range extra {
		f(tp)
	}
	if err := r.c.Apply(context.Background(), tp); err != nil {
		r.t.Fatal(err)
	}
}

// send publishes one payload straight to queue q.
func (r *rig) send(q string, p order, opts ...acemq.SendOption) acemq.Sent {
	r.t.Helper()
	s, err := acemq.NewPublisher[order](r.c, "", q).Send(context.Background(), p, opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// consume starts a consumer and closes it at cleanup.
func consume[T any](r *rig, q string, h acemq.Handler[T], opts ...acemq.ConsumerOption) *acemq.Consumer {
	r.t.Helper()
	k, err := acemq.Consume(context.Background(), r.c, q, h, opts...)
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
	info, ok := r.broker.QueueInfo(q)
	if !ok {
		r.t.Fatalf("queue %s does not exist", q)
	}
	return info.Messages
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
	_, ok := r.broker.QueueInfo(q)
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
