package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/idempotency/internal/dbtest"

	"go.uber.org/goleak"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type storeCase struct {
	name string
	open func(t *testing.T, now func() time.Time) Store
}

func sqlStore(open func(*testing.T) (*sql.DB, sqlstore.Dialect)) func(*testing.T, func() time.Time) Store {
	return func(t *testing.T, now func() time.Time) Store {
		db, d := open(t)
		s, err := NewSQLStore(db, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EnsureSchema(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.now = now
		return s
	}
}

// stores are the memory store and an SQLStore on each of dbtest.Dialects.
var stores = func() []storeCase {
	out := []storeCase{{"memory", func(t *testing.T, now func() time.Time) Store { s := NewMemoryStore(); s.now = now; return s }}}
	for _, b := range dbtest.Dialects {
		out = append(out, storeCase{b.Name, sqlStore(b.Open)})
	}
	return out
}()

func forEachStore(t *testing.T, f func(t *testing.T, s Store, c *clock)) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			c := &clock{t: time.Now()}
			f(t, sc.open(t, c.now), c)
		})
	}
}

func TestClaimConfirmReleaseAndTakeOver(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, c *clock) {
		ctx := context.Background()
		a, err := s.Claim(ctx, "k1", time.Minute)
		if err != nil || a.Outcome != Claimed || a.Token == "" {
			t.Fatalf("first claim %+v %v", a, err)
		}
		if b, err := s.Claim(ctx, "k1", time.Minute); err != nil || b.Outcome != InProgress {
			t.Fatalf("claim under a live lease: %+v %v", b, err)
		}
		// A "killed" worker's claim is taken over once its lease ends.
		c.advance(time.Minute + time.Second)
		b, err := s.Claim(ctx, "k1", time.Minute)
		if err != nil || b.Outcome != Claimed || b.Token == a.Token {
			t.Fatalf("take-over claim %+v %v", b, err)
		}
		// The dead worker waking up cannot confirm nor release the new claim.
		if err := s.Confirm(ctx, "k1", a.Token); !errors.Is(err, ErrClaimLost) {
			t.Fatalf("stale confirm: %v", err)
		}
		if err := s.Release(ctx, "k1", a.Token); err != nil {
			t.Fatal(err)
		}
		if x, _ := s.Claim(ctx, "k1", time.Minute); x.Outcome != InProgress {
			t.Fatalf("stale release freed the key: %+v", x)
		}
		if err := s.Confirm(ctx, "k1", b.Token); err != nil {
			t.Fatal(err)
		}
		if x, _ := s.Claim(ctx, "k1", time.Minute); x.Outcome != Duplicate {
			t.Fatalf("after confirm: %+v", x)
		}
		c.advance(2 * time.Hour) // a confirmed key outlives its claim's lease: it is kept for the retention
		if x, _ := s.Claim(ctx, "k1", time.Minute); x.Outcome != Duplicate {
			t.Fatalf("confirmed key after its lease: %+v", x)
		}
		// Release frees an unconfirmed claim at once.
		r, _ := s.Claim(ctx, "k2", time.Minute)
		if err := s.Release(ctx, "k2", r.Token); err != nil {
			t.Fatal(err)
		}
		if x, _ := s.Claim(ctx, "k2", time.Minute); x.Outcome != Claimed {
			t.Fatalf("after release: %+v", x)
		}
		// Prune drops the keys whose window ended: the expired claim, not
		// the confirmed key within its retention.
		c.advance(2 * time.Minute)
		n, err := s.Prune(ctx, c.now())
		if err != nil || n != 1 {
			t.Fatalf("prune removed %d (%v), want 1", n, err)
		}
		if x, _ := s.Claim(ctx, "k1", time.Minute); x.Outcome != Duplicate {
			t.Fatalf("a confirmed key within its retention after a prune: %+v", x)
		}
		c.advance(DefaultRetention)
		if n, err := s.Prune(ctx, c.now()); err != nil || n != 1 {
			t.Fatalf("prune after the retention removed %d (%v), want 1", n, err)
		}
		if x, _ := s.Claim(ctx, "k1", time.Minute); x.Outcome != Claimed {
			t.Fatalf("pruned key: %+v", x)
		}
	})
}

// A key is its exact text: keys that differ only in case or in a trailing
// space are different messages (MySQL's default collations compare them
// equal, which made the second a "duplicate" that was never run).
func TestKeysThatDifferOnlyInCaseOrTrailingSpaceAreDifferentKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, _ *clock) {
		ctx := context.Background()
		for _, k := range []string{"Order-1", "order-1", "ORDER-1", "Order-1 "} {
			cl, err := s.Claim(ctx, k, time.Minute)
			if err != nil || cl.Outcome != Claimed {
				t.Fatalf("claim %q: %+v %v; want it claimed as a key of its own", k, cl, err)
			}
			if err := s.Confirm(ctx, k, cl.Token); err != nil {
				t.Fatalf("confirm %q: %v", k, err)
			}
		}
	})
}

// Keys in any script are stored and found again (a MySQL table in the
// server's default latin1 refused them).
func TestKeysInAnyScriptAreStoredAndFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, _ *clock) {
		ctx := context.Background()
		for _, k := range []string{"заказ-1", "注文-1", "🧾-1", "Straße-1"} {
			cl, err := s.Claim(ctx, k, time.Minute)
			if err != nil || cl.Outcome != Claimed {
				t.Fatalf("claim %q: %+v %v", k, cl, err)
			}
			if err := s.Confirm(ctx, k, cl.Token); err != nil {
				t.Fatalf("confirm %q: %v", k, err)
			}
			if again, err := s.Claim(ctx, k, time.Minute); err != nil || again.Outcome != Duplicate {
				t.Fatalf("claim %q again: %+v %v; want a duplicate", k, again, err)
			}
		}
	})
}

// Prune takes every expired key, however many (MySQL deletes them in
// batches of 500).
func TestPruneRemovesEveryExpiredKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, c *clock) {
		ctx := context.Background()
		const n = 501
		for i := range n {
			if cl, err := s.Claim(ctx, fmt.Sprint("k", i), time.Minute); err != nil || cl.Outcome != Claimed {
				t.Fatalf("claim %d: %+v %v", i, cl, err)
			}
		}
		c.advance(2 * time.Minute)
		if got, err := s.Prune(ctx, c.now()); err != nil || got != n {
			t.Fatalf("prune removed %d (%v), want %d", got, err, n)
		}
		if got, err := s.Prune(ctx, c.now()); err != nil || got != 0 {
			t.Fatalf("second prune removed %d (%v), want 0", got, err)
		}
	})
}

func TestSQLClaimRacesGiveOneClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, _ *clock) {
		ctx := context.Background()
		var claimed atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := s.Claim(ctx, "race", time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if cl.Outcome == Claimed {
					claimed.Add(1)
				}
			}()
		}
		wg.Wait()
		if claimed.Load() != 1 {
			t.Fatalf("%d workers claimed one key", claimed.Load())
		}
	})
}

type pay struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

func msg(id string) *acemq.Message[pay] {
	e := acemq.NewEnvelope()
	e.ID = id
	return &acemq.Message[pay]{Envelope: e, Payload: pay{"acc", 10}}
}

func TestGuardDecisions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store, _ *clock) {
		ctx := context.Background()
		var runs atomic.Int32
		next := acemq.Accept()
		panicNow := false
		h := Guard(s, func(ctx context.Context, m *acemq.Message[pay]) acemq.Decision {
			runs.Add(1)
			if panicNow {
				panic("boom")
			}
			return next
		}, WithLogger[pay](slog.New(slog.DiscardHandler)))

		// Failure → released → runs again; panic → released, Reject(Fatal).
		next = acemq.Retry(errors.New("db down"))
		if d := h(ctx, msg("m1")); d.String() != "retry" {
			t.Fatalf("decision %v", d)
		}
		panicNow = true
		d := h(ctx, msg("m1"))
		if d.String() != "reject" || !acemq.IsFatal(d.Err()) || !strings.Contains(d.Err().Error(), "panicked") {
			t.Fatalf("panic decision %v %v", d, d.Err())
		}
		panicNow, next = false, acemq.Accept()
		if d := h(ctx, msg("m1")); d.String() != "accept" || runs.Load() != 3 {
			t.Fatalf("decision %v after %d runs", d, runs.Load())
		}
		// Duplicate of a confirmed message: accepted without running.
		if d := h(ctx, msg("m1")); d.String() != "accept" || runs.Load() != 3 {
			t.Fatalf("duplicate: %v, runs %d", d, runs.Load())
		}
		// A claim held elsewhere: in progress, not run.
		if _, err := s.Claim(ctx, "m2", time.Minute); err != nil {
			t.Fatal(err)
		}
		if d := h(ctx, msg("m2")); d.String() != "in_progress" || runs.Load() != 3 {
			t.Fatalf("held claim: %v, runs %d", d, runs.Load())
		}
		// Empty key: fatal reject.
		if d := h(ctx, msg("")); d.String() != "reject" || !acemq.IsFatal(d.Err()) {
			t.Fatalf("empty key: %v", d)
		}
	})
}

type failingStore struct{ Store }

func (failingStore) Claim(context.Context, string, time.Duration) (Claim, error) {
	return Claim{}, errors.New("store down")
}

func TestGuardRetriesOnStoreError(t *testing.T) {
	h := Guard(failingStore{NewMemoryStore()}, func(context.Context, *acemq.Message[pay]) acemq.Decision {
		t.Fatal("ran without a claim")
		return acemq.Accept()
	})
	if d := h(context.Background(), msg("x")); d.String() != "retry" || d.Err() == nil {
		t.Fatalf("decision %v", d)
	}
}

var sqlBackends = dbtest.Dialects

func balanceDB(t *testing.T, open func(*testing.T) (*sql.DB, sqlstore.Dialect)) (*sql.DB, sqlstore.Dialect) {
	db, d := open(t)
	ctx := context.Background()
	if err := EnsureSchema(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE balance (account VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO balance (account, amount) VALUES ('acc', 0)`); err != nil {
		t.Fatal(err)
	}
	return db, d
}

func balance(t *testing.T, db *sql.DB) int {
	var n int
	if err := db.QueryRow(`SELECT amount FROM balance WHERE account = 'acc'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func credit(d sqlstore.Dialect, panicAfter *atomic.Bool) TxHandler[pay] {
	return func(ctx context.Context, tx *sql.Tx, m *acemq.Message[pay]) acemq.Decision {
		if _, err := tx.ExecContext(ctx, d.Rebind(`UPDATE balance SET amount = amount + ? WHERE account = ?`), m.Payload.Amount, m.Payload.Account); err != nil {
			return acemq.Retry(err)
		}
		if panicAfter != nil && panicAfter.CompareAndSwap(true, false) {
			panic("killed after the effect")
		}
		return acemq.Accept()
	}
}

func TestTransactionalPanicAfterTheEffectRollsItBack(t *testing.T) {
	for _, b := range sqlBackends {
		t.Run(b.Name, func(t *testing.T) {
			db, d := balanceDB(t, b.Open)
			var boom atomic.Bool
			boom.Store(true)
			h := Transactional(db, d, credit(d, &boom))
			ctx := context.Background()
			if dec := h(ctx, msg("p1")); dec.String() != "reject" || !acemq.IsFatal(dec.Err()) {
				t.Fatalf("panic decision %v", dec)
			}
			if n := balance(t, db); n != 0 {
				t.Fatalf("balance %d after a panic inside the transaction", n)
			}
			for range 2 { // redelivery, then a duplicate
				if dec := h(ctx, msg("p1")); dec.String() != "accept" {
					t.Fatalf("decision %v", dec)
				}
			}
			if n := balance(t, db); n != 10 {
				t.Fatalf("balance %d, want the effect once (10)", n)
			}
		})
	}
}

// The handler commits, then the connection drops before the ack: the
// broker redelivers, and the key committed with the effect makes the
// redelivery a duplicate. The balance shows the effect once.
func TestTransactionalAckLostAfterCommitAppliesTheEffectOnce(t *testing.T) {
	for _, b := range sqlBackends {
		t.Run(b.Name, func(t *testing.T) {
			db, d := balanceDB(t, b.Open)
			ctx := context.Background()
			name := "idem-" + dbtest.RandHex(6)
			c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if err := c.Apply(ctx, acemq.NewTopology().Queue("payments", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
				t.Fatal(err)
			}
			inner := Transactional(db, d, credit(d, nil))
			var deliveries atomic.Int32
			accepted := make(chan bool, 4)
			cons, err := acemq.Consume(ctx, c, "payments", func(ctx context.Context, m *acemq.Message[pay]) acemq.Decision {
				dec := inner(ctx, m)
				if deliveries.Add(1) == 1 {
					memory.Lookup(name).DropConnections() // the ack cannot be sent
				}
				accepted <- m.Redelivered
				return dec
			}, acemq.ConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close(ctx)
			if _, err := c.Publish(ctx, "", "payments", pay{"acc", 10}, acemq.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				select {
				case <-accepted:
				case <-time.After(15 * time.Second):
					t.Fatalf("delivery %d never came", i+1)
				}
			}
			if n := balance(t, db); n != 10 {
				t.Fatalf("balance %d after a redelivery, want 10", n)
			}
		})
	}
}

// A Transactional handler still running (its key inserted, not committed)
// holds up neither Prune nor a claim of another key (on MySQL Prune scans
// the table, and under InnoDB's REPEATABLE READ it waited for the
// handler's row lock and meanwhile held up every new key's insert).
// SQLite is left out: its one writer holds up every other writer.
func TestRunningTransactionalHandlerHoldsUpNoPruneNorClaim(t *testing.T) {
	for _, b := range sqlBackends {
		if b.Name == "sqlite" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			db, d := balanceDB(t, b.Open)
			s, err := NewSQLStore(db, d)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Claim(ctx, "older", time.Minute); err != nil {
				t.Fatal(err)
			}
			running, finish := make(chan struct{}), make(chan struct{})
			h := Transactional(db, d, func(ctx context.Context, tx *sql.Tx, m *acemq.Message[pay]) acemq.Decision {
				close(running)
				<-finish
				return acemq.Accept()
			})
			done := make(chan acemq.Decision, 1)
			go func() { done <- h(ctx, msg("slow")) }()
			<-running
			bound, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, pruneErr := s.Prune(bound, time.Now())
			cl, claimErr := s.Claim(bound, "newer", time.Minute)
			close(finish)
			if dec := <-done; dec.String() != "accept" {
				t.Fatalf("the running handler's decision: %v", dec)
			}
			if pruneErr != nil {
				t.Fatalf("prune beside a running Transactional handler: %v", pruneErr)
			}
			if claimErr != nil || cl.Outcome != Claimed {
				t.Fatalf("claim beside a running Transactional handler: %+v %v", cl, claimErr)
			}
		})
	}
}

// Two deliveries of one message wait while a third runs it; the third
// fails and rolls back. One of the two then runs the handler and the other
// is accepted as a duplicate, neither comes back as a retry. (On MySQL the
// two deadlocked, InnoDB's insert-after-rollback deadlock, and one
// answered Retry with "Deadlock found".) SQLite is left out: its one
// writer makes the two wait for the lock, not for the key.
func TestDuplicatesWaitingOnARunThatRollsBackRunOnceAndRetryNone(t *testing.T) {
	for _, b := range sqlBackends {
		if b.Name == "sqlite" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			db, d := balanceDB(t, b.Open)
			ctx := context.Background()
			var runs atomic.Int32
			first, fail := make(chan struct{}), make(chan struct{})
			h := Transactional(db, d, func(ctx context.Context, tx *sql.Tx, m *acemq.Message[pay]) acemq.Decision {
				if runs.Add(1) == 1 {
					close(first)
					<-fail
					return acemq.Retry(errors.New("the first run fails"))
				}
				return acemq.Accept()
			})
			decisions := make(chan acemq.Decision, 3)
			go func() { decisions <- h(ctx, msg("dup")) }()
			<-first
			for range 2 {
				go func() { decisions <- h(ctx, msg("dup")) }()
			}
			// Both wait on the first run's key.
			waiting := `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'INSERT INTO acemq_idempotency%'`
			if d == sqlstore.PostgreSQL {
				waiting = `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'INSERT INTO acemq_idempotency%'`
			}
			for n := 0; n < 2; {
				if err := db.QueryRowContext(ctx, waiting).Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			close(fail)
			got := map[string]int{}
			for range 3 {
				dec := <-decisions
				got[dec.String()]++
				if dec.String() == "retry" && !strings.Contains(dec.Err().Error(), "the first run fails") {
					t.Errorf("a waiting delivery answered retry: %v", dec.Err())
				}
			}
			if got["retry"] != 1 || got["accept"] != 2 || runs.Load() != 2 {
				t.Fatalf("decisions %v after %d runs; want the failed run's retry, two accepts and one more run", got, runs.Load())
			}
		})
	}
}
