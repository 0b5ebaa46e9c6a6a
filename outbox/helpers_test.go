package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/outbox/internal/dbtest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// backend is one database the table-driven tests run on; backends are
// all of dbtest.Dialects.
type backend = dbtest.Backend

var backends = dbtest.Dialects

// fakeClock is a store clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T, b backend) *Store {
	t.Helper()
	db, d := b.Open(t)
	s, err := NewStore(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(context.Background()); err != nil {
		t.Fatalf("EnsureSchema twice: %v", err)
	}
	return s
}

// memConn connects to a fresh memory broker with queue declared.
func memConn(t testing.TB, queues ...string) (*acemq.Conn, string) {
	t.Helper()
	ctx := context.Background()
	name := "outbox-" + dbtest.RandHex(6)
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), ConfirmTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	top := acemq.NewTopology()
	for _, q := range queues {
		top = top.Queue(q, acemq.QueueOptions{Type: acemq.Classic})
	}
	if err := c.Apply(ctx, top); err != nil {
		t.Fatal(err)
	}
	return c, name
}

// add commits one record per payload in its own transaction.
func add(t *testing.T, s *Store, c *acemq.Conn, exchange, key string, payloads ...any) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for _, p := range payloads {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		env, err := s.Add(ctx, tx, c, exchange, key, p)
		if err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.ID)
	}
	return ids
}

// addOrders commits n orders (order{"0", 0}, order{"1", 1}, ...) for queue
// "orders" on the default exchange, each in its own transaction, and
// returns their ids in seq order.
func addOrders(t *testing.T, s *Store, c *acemq.Conn, n int) []string {
	t.Helper()
	var sent []string
	for i := range n {
		sent = append(sent, add(t, s, c, "", "orders", order{fmt.Sprint(i), i})...)
	}
	return sent
}

// ordersWithOneUnroutable declares exchange shop with queue orders bound
// by key "k" on c, then commits n orders through s with key "k", but for
// record bad, whose key "k<bad>" routes nowhere until a test binds it. It
// returns the topology declared and the records' ids in seq order.
func ordersWithOneUnroutable(t *testing.T, s *Store, c *acemq.Conn, n, bad int) (*acemq.Topology, []string) {
	t.Helper()
	top := acemq.NewTopology().Exchange("shop", acemq.Direct, acemq.ExchangeOptions{}).Queue("orders", acemq.QueueOptions{Type: acemq.Classic}).Bind("orders", "shop", "k")
	if err := c.Apply(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range n {
		key := "k"
		if i == bad {
			key = fmt.Sprint("k", bad)
		}
		sent = append(sent, add(t, s, c, "shop", key, order{fmt.Sprint(i), i})...)
	}
	return top, sent
}

// drain takes every message now in queue, riding out a recovery.
func drain(t *testing.T, c *acemq.Conn, queue string) []*acemq.Pulled {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	var out []*acemq.Pulled
	for {
		more, err := drainOnce(ctx, c, queue, &out)
		if err == nil && !more {
			return out
		}
		if err != nil && time.Now().After(deadline) {
			t.Fatalf("cannot drain %s: %v", queue, err)
		}
	}
}

func drainOnce(ctx context.Context, c *acemq.Conn, queue string, out *[]*acemq.Pulled) (bool, error) {
	p, err := c.NewPuller(ctx)
	if err != nil {
		return true, err
	}
	defer p.Close()
	for {
		m, ok, err := p.Pull(ctx, queue)
		if err != nil {
			return true, err
		}
		if !ok {
			return false, nil
		}
		if err := m.Ack(); err != nil {
			return true, err
		}
		*out = append(*out, m)
	}
}

func ids(ms []*acemq.Pulled) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Envelope.ID
	}
	return out
}

// backendNamed returns the backend called name ("sqlite", "postgres",
// "mysql"), for a test of one database's own behaviour.
func backendNamed(t *testing.T, name string) backend {
	t.Helper()
	for _, b := range backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend is called %q", name)
	return backend{}
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) { f(t, b) })
	}
}

// forEachServerBackend runs f on the backends that are database servers
// (every one but SQLite, whose one writer holds up every other writer).
func forEachServerBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		if b.Name != "sqlite" {
			t.Run(b.Name, func(t *testing.T) { f(t, b) })
		}
	}
}

func newRelay(t *testing.T, c *acemq.Conn, s *Store, opts ...RelayOption) *Relay {
	t.Helper()
	r, err := NewRelay(c, s, append([]RelayOption{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// ownerOf returns relay's hold on s, ended when the test ends.
func ownerOf(t *testing.T, s *Store, relay string) *owner {
	t.Helper()
	o := s.owner(relay, time.Minute)
	t.Cleanup(o.close)
	return o
}

// lastCopies keeps the last copy of every id, in the order those copies
// arrived: what a consumer that lets a later copy replace an earlier one
// ends up with.
func lastCopies(got []string) []string {
	last := map[string]int{}
	for i, id := range got {
		last[id] = i
	}
	var out []string
	for i, id := range got {
		if last[id] == i {
			out = append(out, id)
		}
	}
	return out
}

// isNacked reports whether err is a PublishError for a nacked message.
func isNacked(err error) bool {
	var pe *acemq.PublishError
	return errors.As(err, &pe) && pe.Nacked
}

// isMissingExchange reports whether err is a publish refused with 404
// NOT_FOUND on its channel (the exchange does not exist).
func isMissingExchange(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.Code == transport.CodeNotFound && !te.Connection
}
