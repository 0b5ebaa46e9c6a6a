package acemqtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// DefaultSettleLimit is how much virtual time Settle lets pass when its
// context has no deadline of its own.
const DefaultSettleLimit = 24 * time.Hour

// Config configures a Harness. The zero Config works: an empty broker, a
// Conn with the default settings.
type Config struct {
	// Topology is the service's own topology, applied on the harness's
	// Conn at Start (nil: none).
	Topology *acemq.Topology
	// Conn configures the harness's Conn as the service would configure
	// its own (retry policy, codec, interceptors, hooks). The harness
	// wraps OnSettlement, OnFallback and OnEvent to keep its records; the
	// service's own hooks are still called, after the harness's. A nil
	// Logger writes warnings and errors to the test's log.
	Conn acemq.Config
	// SettleLimit is how much virtual time Settle lets pass when its
	// context has no deadline (0 means DefaultSettleLimit).
	SettleLimit time.Duration
}

// Harness runs a service's messaging in a testing/synctest bubble on a
// broker of its own (memory://), records what happens to every message
// and waits until nothing is left in flight. Inside the bubble every clock
// the library reads is the bubble's fake clock: retry waits held in a
// consumer and on broker rungs, the broker's TTLs, the scheduler's rungs,
// request timeouts, the outbox relay's poll, saga leases, drain deadlines,
// context deadlines, and the service's own timers too. Time moves only
// when every goroutine of the bubble is blocked, so minutes of waits pass
// in microseconds.
//
// A Harness is made by Start (or Run) inside the bubble and used only
// there. Its methods are safe for concurrent use, except Settle, SettleNow
// and Advance, which the test's own goroutine calls one at a time.
type Harness struct {
	t      testing.TB
	name   string
	broker *memory.Broker
	conn   *acemq.Conn
	limit  time.Duration
	topo   *acemq.Topology // Config.Topology
	stop   func()          // ends the broker watch

	mu       sync.Mutex
	conns    []*acemq.Conn
	trackers []Tracker
	wake     chan struct{} // closed at the next change Settle should see
	rec      recorder
}

var harnesses atomic.Int64

// Run runs f in a new testing/synctest bubble with a Harness started there
// (see Start), for a test that needs nothing else in its bubble. Everything
// the harness started is closed before Run returns.
func Run(t *testing.T, cfg Config, f func(t *testing.T, h *Harness)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		f(t, Start(t, cfg))
	})
}

// Start makes a harness: a fresh in-process broker of its own (the URL is
// h.URL()), a Conn on it configured by cfg.Conn (h.Conn()), and
// cfg.Topology applied. It must be called inside a testing/synctest
// bubble (synctest.Test, or Run), where the clock is virtual; elsewhere
// it fails the test saying so. When the test ends, t's cleanup closes
// every Conn the harness made (draining their consumers) and deletes the
// broker; register the service's own clean-ups (closing a relay, a
// requester) after Start so they run first. Start fails t if the Conn
// cannot connect or the topology is refused.
func Start(t testing.TB, cfg Config) *Harness {
	t.Helper()
	if !inBubble() {
		t.Fatalf("acemqtest: Start must run inside a testing/synctest bubble, where the library's clock is virtual: wrap the test in synctest.Test(t, func(t *testing.T) { … }) or use acemqtest.Run")
		return nil
	}
	name := fmt.Sprintf("acemqtest-%s-%d", strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), harnesses.Add(1))
	memory.Delete(name)
	h := &Harness{
		t: t, name: name, broker: memory.Lookup(name),
		limit: cfg.SettleLimit, topo: cfg.Topology,
	}
	if h.limit <= 0 {
		h.limit = DefaultSettleLimit
	}
	h.rec.init()
	h.stop = h.broker.Watch(h.observe)
	t.Cleanup(h.close)
	h.conn = h.Connect(cfg.Conn)
	if cfg.Topology != nil {
		if err := h.conn.Apply(context.Background(), cfg.Topology); err != nil {
			t.Fatalf("acemqtest: the topology was refused: %v", err)
		}
	}
	return h
}

// inBubble reports whether the calling goroutine is in a synctest bubble.
func inBubble() (in bool) {
	defer func() {
		if recover() != nil {
			in = false
		}
	}()
	synctest.Wait()
	return true
}

// Conn returns the harness's Conn: give it to the service's constructors
// as its own.
func (h *Harness) Conn() *acemq.Conn { return h.conn }

// URL returns the broker's memory:// URL.
func (h *Harness) URL() string { return "memory://" + h.name }

// Broker returns the in-process broker, whose fault hooks make it fail as
// RabbitMQ can: Block and Unblock (a resource alarm), DropConnections,
// DropConnectionsAtPublish and DropConnectionsAfterPublish (a connection
// lost at the nth publish, before or after it was routed), NackNext,
// StopConfirming and ResumeConfirming.
func (h *Harness) Broker() *memory.Broker { return h.broker }

// Connect opens one more Conn on the harness's broker (a second service,
// a second instance of this one), configured by cfg as Start configures
// the first: its settlements, fallbacks and events are recorded and Settle
// counts its consumers. It is closed when the test ends. Connect fails the
// test if the Conn cannot connect.
func (h *Harness) Connect(cfg acemq.Config) *acemq.Conn {
	h.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(h.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	settled, fell, event := cfg.OnSettlement, cfg.OnFallback, cfg.OnEvent
	cfg.OnSettlement = func(s acemq.Settlement) {
		h.settled(s)
		if settled != nil {
			settled(s)
		}
	}
	cfg.OnFallback = func(f acemq.Fallback) {
		h.fellBack(f)
		if fell != nil {
			fell(f)
		}
	}
	cfg.OnEvent = func(e acemq.Event) {
		h.signal()
		if event != nil {
			event(e)
		}
	}
	c, err := acemq.Connect(context.Background(), h.URL(), cfg)
	if err != nil {
		h.t.Fatalf("acemqtest: cannot connect to %s: %v", h.URL(), err)
	}
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	return c
}

// Track makes Settle wait for x's pending work too: an outbox relay's
// stored records, a saga runner's unfinished instances, anything of the
// service that holds messages outside the broker. See Tracker.
func (h *Harness) Track(x Tracker) {
	h.mu.Lock()
	h.trackers = append(h.trackers, x)
	h.mu.Unlock()
}

// Now is the bubble's virtual time.
func (h *Harness) Now() time.Time { return time.Now() }

// Advance lets d of virtual time pass, running everything that falls due
// in it in order (a retry's put-back, a rung's expiry, a timeout), and
// returns once nothing more can run at the new instant. Call it from the
// test's goroutine.
func (h *Harness) Advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// close ends what the harness started: the Conns (each drains its
// consumers in virtual time), the broker and its watch.
func (h *Harness) close() {
	h.mu.Lock()
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for i := len(conns) - 1; i >= 0; i-- {
		if err := conns[i].Close(context.Background()); err != nil {
			h.t.Errorf("acemqtest: closing a Conn: %v", err)
		}
	}
	h.stop()
	memory.Delete(h.name)
}

// signal wakes a Settle waiting for something to change.
func (h *Harness) signal() {
	h.mu.Lock()
	if h.wake != nil {
		close(h.wake)
		h.wake = nil
	}
	h.mu.Unlock()
}

// changed returns a channel closed at the next change.
func (h *Harness) changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wake == nil {
		h.wake = make(chan struct{})
	}
	return h.wake
}

// Clock is the bubble's clock for a part that takes a clock of its own (a
// saga runner's WithClock, so its leases move with the bubble instead of
// the database's clock): Now and AfterFunc are the time package's, which
// in the bubble are virtual. The zero value is ready to use.
type Clock struct{}

// Now is time.Now: in the bubble, virtual time.
func (Clock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc, returning its timer's Stop.
func (Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}
