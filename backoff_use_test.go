package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// The tests here check that the back-off waits are jittered where they
// are taken, not only that jitter draws: each replaces backoffDraw with a
// recorder, drives a real recovery or re-subscription on memory://, and
// checks which spans the waits were drawn for. Without the jitter at a
// point of use, the recorder never sees that wait and the test fails.

// draws records the spans backoffDraw is asked to draw for, and answers
// every draw with u.
type draws struct {
	u      float64
	mu     sync.Mutex
	spans  []time.Duration
	notify chan struct{} // a token after each draw
}

// recordDraws replaces backoffDraw for the rest of the test. Register it
// before anything that can draw, so that its cleanup (which restores
// backoffDraw) runs after theirs.
func recordDraws(t *testing.T, u float64) *draws {
	t.Helper()
	d := &draws{u: u, notify: make(chan struct{}, 1)}
	f := func(span time.Duration) float64 {
		d.mu.Lock()
		d.spans = append(d.spans, span)
		d.mu.Unlock()
		select {
		case d.notify <- struct{}{}:
		default:
		}
		return d.u
	}
	prev := backoffDraw.Swap(&f)
	t.Cleanup(func() { backoffDraw.Store(prev) })
	return d
}

func (d *draws) list() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.spans)
}

// waitFor waits until at least n draws were made. The limit only bounds a
// failing test; a passing one never comes near it.
func (d *draws) waitFor(t *testing.T, n int, what string) {
	t.Helper()
	limit := time.NewTimer(10 * time.Second)
	defer limit.Stop()
	for len(d.list()) < n {
		select {
		case <-d.notify:
		case <-limit.C:
			t.Fatalf("%s: %d jittered waits drawn in 10s (spans %v), want at least %d", what, len(d.list()), d.list(), n)
		}
	}
}

// recoverAfterFailures connects to faulty+memory://name, drops the
// connection and lets the next `fail` recovery attempts fail with err. It
// returns once the Conn recovered, with the number of attempts it took.
func recoverAfterFailures(t *testing.T, name string, cfg Config, fail int, err error) int {
	t.Helper()
	f := injectFaults(t, name)
	f.dialErr = err
	recovered := make(chan int, 1)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventRecovered {
			recovered <- e.Attempt
		}
	}
	c, cerr := Connect(context.Background(), "faulty+memory://"+name, cfg)
	if cerr != nil {
		t.Fatal(cerr)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	f.dialsLeft.Store(int32(fail))
	memory.Lookup(name).DropConnections()
	select {
	case n := <-recovered:
		if n != fail+1 {
			t.Fatalf("recovered at attempt %d, want %d", n, fail+1)
		}
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no recovery within 10s")
		return 0
	}
}

// Every recovery attempt waits a jittered back-off step (lifecycle.recover),
// and the step doubles to RecoveryIntervalMax after a failure the broker
// answered.
func TestJitterOnEveryReconnectionBackOff(t *testing.T) {
	d := recordDraws(t, 0)
	const step, top = 3 * time.Millisecond, 10 * time.Millisecond
	recoverAfterFailures(t, "jitter-reconnect", Config{RecoveryInterval: step, RecoveryIntervalMax: top},
		3, errors.New("the broker refused the login (test)"))
	want := []time.Duration{step, 2 * step, top, top}
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("the recovery drew jittered waits for spans %v, want %v (one per attempt, doubling to the cap)", got, want)
	}
}

// After a refused dial (nothing listening) the step stays at
// RecoveryInterval, and each wait is still jittered. (memory:// cannot
// probe, so there is no knock here; see TestJitterOnTheKnocksOnARefusedPort.)
func TestJitterOnTheReconnectionBackOffAfterARefusal(t *testing.T) {
	d := recordDraws(t, 0)
	const step = 3 * time.Millisecond
	refused := fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	if !isConnRefused(refused) {
		t.Fatal("the test's refusal is not one isConnRefused sees")
	}
	recoverAfterFailures(t, "jitter-reconnect-refused", Config{RecoveryInterval: step, RecoveryIntervalMax: 10 * step}, 2, refused)
	want := []time.Duration{step, step, step}
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("the recovery drew jittered waits for spans %v, want %v (one per attempt, not backing off)", got, want)
	}
}

// probingDriver can only probe, and says the broker listens.
type probingDriver struct{ probes atomic.Int32 }

func (*probingDriver) Name() string           { return "probing" }
func (*probingDriver) Capabilities() []string { return nil }
func (*probingDriver) Dial(context.Context, transport.Config) (transport.Connection, int, error) {
	return nil, 0, errors.New("probingDriver does not dial")
}
func (p *probingDriver) Probe(context.Context, transport.Config) bool {
	p.probes.Add(1)
	return true
}

// While a refused port is probed, the knock and the spread after it are
// jittered (waitRetry: probeWait, spreadWait). No transport in the module
// probes but RabbitMQ's, so this drives waitRetry itself, the smallest unit
// that takes these waits, with a driver that probes. Its back-off wait is
// an hour: only the knock ends the wait.
func TestJitterOnTheKnocksOnARefusedPort(t *testing.T) {
	d := recordDraws(t, 0)
	p := &probingDriver{}
	closing, stop := context.WithCancel(context.Background())
	defer stop()
	l := &lifecycle{links: &links{driver: p}, closing: closing}
	if !l.waitRetry(time.Hour, true) {
		t.Fatal("waitRetry reported Close")
	}
	if n := p.probes.Load(); n != 1 {
		t.Fatalf("%d probes, want 1", n)
	}
	want := []time.Duration{probeEvery, reconnectSpread}
	if got := d.list(); !slices.Equal(got, want) {
		t.Fatalf("waitRetry drew jittered waits for spans %v, want %v (the knock, then the spread)", got, want)
	}
}

// A consumer whose subscription the broker cancelled re-subscribes after
// a jittered back-off step (consumerCore.resubscribe), doubling to
// RecoveryIntervalMax while the attempts fail.
func TestJitterOnTheResubscribeBackOff(t *testing.T) {
	d := recordDraws(t, 0)
	ctx := context.Background()
	const name = "jitter-resubscribe"
	t.Cleanup(func() { memory.Delete(name) })
	const step, top = 3 * time.Millisecond, 10 * time.Millisecond
	warned := make(chan struct{})
	logger := slog.New(&onMessage{prefix: "acemq: a consumer stopped reading", seen: warned})
	c, err := Connect(ctx, "memory://"+name, Config{Logger: logger, RecoveryInterval: step, RecoveryIntervalMax: top})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	queue := func() {
		t.Helper()
		if err := c.Apply(ctx, NewTopology().Queue("q", QueueOptions{Type: Classic})); err != nil {
			t.Fatal(err)
		}
	}
	queue()
	got := make(chan string, 4)
	k, err := Consume(ctx, c, "q", func(_ context.Context, m *Message[string]) Decision {
		got <- m.Payload
		return Accept()
	}, ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(ctx) })

	// The queue goes: the broker cancels the subscription, and every
	// re-subscription fails until it is back.
	if _, err := c.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	// The re-subscriber warns after its first wait, before its first
	// attempt: that wait was drawn by then.
	select {
	case <-warned:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not start re-subscribing within 10s")
	}
	if spans := d.list(); len(spans) == 0 || spans[0] != step {
		t.Fatalf("the re-subscriber's first wait is over and the jittered waits drawn are for spans %v, want %v first", spans, step)
	}
	d.waitFor(t, 4, "a consumer whose queue was deleted")
	queue()
	if _, err := NewPublisher[string](c, "", "q", PublisherConfig{}).Send(ctx, "back"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "back" {
			t.Fatalf("got %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not read again within 10s")
	}
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	spans := d.list()
	if want := []time.Duration{step, 2 * step, top, top}; !slices.Equal(spans[:4], want) {
		t.Fatalf("the re-subscriber drew jittered waits for spans %v, want %v and then %v each", spans, want, top)
	}
	for _, s := range spans[4:] {
		if s != top {
			t.Fatalf("the re-subscriber drew jittered waits for spans %v, want %v and then %v each", spans, []time.Duration{step, 2 * step, top, top}, top)
		}
	}
}

// onMessage is a slog handler that closes seen at the first record whose
// message starts with prefix.
type onMessage struct {
	prefix string
	seen   chan struct{}
	once   sync.Once
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }
