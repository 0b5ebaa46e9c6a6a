package pgnotify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/outbox/pgnotify"
	"github.com/acemq-go/acemq/outbox/pgnotify/internal/dbtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

// wakeSignal is a notifier around the Listener that reports when it has
// subscribed (its first wake).
type wakeSignal struct {
	l    *pgnotify.Listener
	subd chan struct{}
}

func (w *wakeSignal) Listen(ctx context.Context, wake func()) error {
	first := true
	return w.l.Listen(ctx, func() {
		if first {
			first = false
			close(w.subd)
		}
		wake()
	})
}

// With polling every hour, a committed record is published within
// moments: Add's pg_notify wakes the LISTENing relay.
func TestListenWakesTheRelayOnCommit(t *testing.T) {
	ctx := context.Background()
	db, d := dbtest.Postgres(t)
	s, err := outbox.NewStore(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := acemq.Connect(ctx, "memory://pgnotify-"+dbtest.RandHex(6), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	sweeps := make(chan outbox.Sweep, 16)
	n := &wakeSignal{l: pgnotify.New(db), subd: make(chan struct{})}
	r, err := outbox.NewRelay(c, s, outbox.WithInterval(time.Hour), outbox.WithNotifier(n),
		outbox.WithLogger(slog.New(slog.DiscardHandler)), outbox.WithObserver(func(sw outbox.Sweep) { sweeps <- sw }))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-n.subd:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never LISTENed")
	}
	start := time.Now()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := s.Add(ctx, tx, c, "", "orders", map[string]string{"id": "now"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for published := false; !published; {
		select {
		case sw := <-sweeps:
			published = sw.Published == 1
		case <-time.After(5 * time.Second):
			t.Fatal("the record was not published without polling")
		}
	}
	t.Logf("commit → confirm and delete in %v", time.Since(start))
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, ok, err := p.Pull(ctx, "orders")
	if err != nil || !ok || m.Envelope.ID != env.ID {
		t.Fatalf("pulled %v %v, want %s", ok, err, env.ID)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
}

// A database opened with another driver is refused with ErrNotPgx, so the
// relay logs it and polls.
func TestListenRefusesAnotherDriver(t *testing.T) {
	db, _ := dbtest.SQLite(t)
	err := pgnotify.New(db).Listen(context.Background(), func() {})
	if err != pgnotify.ErrNotPgx {
		t.Fatalf("Listen on SQLite: %v, want ErrNotPgx", err)
	}
}

// A transaction that adds three records notifies once (the notify is in
// the insert, and PostgreSQL sends a transaction's identical
// notifications once), and a store made WithoutNotify notifies nobody.
// The default store's later single Add marks where the count is whole:
// notifications arrive in commit order.
func TestATransactionNotifiesOnceAndWithoutNotifyNever(t *testing.T) {
	ctx := context.Background()
	db, d := dbtest.Postgres(t)
	s, err := outbox.NewStore(db, d)
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := outbox.NewStore(db, d, outbox.WithoutNotify())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := acemq.Connect(ctx, "memory://pgnotify-"+dbtest.RandHex(6), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	wakes := make(chan struct{}, 64)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pgnotify.New(db).Listen(lctx, func() { wakes <- struct{}{} }) }()
	defer func() { cancel(); <-done }()
	next := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification: %s", what)
		}
	}
	next("the subscription")
	add := func(st *outbox.Store, n int) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if _, err := st.Add(ctx, tx, c, "", "orders", map[string]int{"n": n}); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	add(s, 3)
	add(quiet, 2)
	add(s, 1)
	next("the transaction of three")
	next("the single add after it")
	select {
	case <-wakes:
		t.Fatal("more than one notification per notifying transaction, or one from WithoutNotify")
	default:
	}
}
