package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/sqlstore"
)

// The order a consumer can rely on when a record in the middle of a batch
// fails (package doc, "Order"): the records before it arrive first, in
// order; records after it may arrive once ahead of it (they were on the
// wire before its failure was known); every one of them is sent again
// after it, so the last copies arrive in seq order; and from its second
// attempt on the failed record goes out alone, so nothing is duplicated
// again.
func TestMidBatchFailureOrderRule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		_, sent := ordersWithOneUnroutable(t, s, c, 8, 3) // record 3 unroutable until bound below
		r := newRelay(t, c, s)
		sw := r.SweepOnce(ctx)
		if sw.Published != 3 || sw.Failed != 0 || !acemq.IsUnroutable(sw.Err) {
			t.Fatalf("first sweep %+v: want the 3 records before the unroutable one published and it refused (no attempt)", sw)
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 5 || p[0].ID != sent[3] || p[0].Attempts != 0 || !strings.Contains(p[0].LastError, "NO_ROUTE") {
			t.Fatalf("after the first sweep %d records pending; want the failed one and the 4 after it", len(p))
		}
		if err := c.Apply(ctx, acemq.NewTopology().Exchange("shop", acemq.Direct, acemq.ExchangeOptions{}).Queue("orders", acemq.QueueOptions{Type: acemq.Classic}).Bind("orders", "shop", "k3")); err != nil {
			t.Fatal(err)
		}
		if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Published != 5 {
			t.Fatalf("second sweep %+v", sw)
		}
		got := ids(drain(t, c, "orders"))
		t.Logf("consumer saw %d messages for %d records", len(got), len(sent))
		if !slices.Equal(got[:3], sent[:3]) {
			t.Fatalf("the records before the failure arrived as %v, want %v first", got[:3], sent[:3])
		}
		if !slices.Equal(lastCopies(got), sent) {
			t.Fatalf("last copies %v, want seq order %v", lastCopies(got), sent)
		}
		count := map[string]int{}
		for _, id := range got {
			count[id]++
		}
		for i, id := range sent {
			if want := 1; (i < 3 || i == 3) && count[id] != want {
				t.Fatalf("record %d arrived %d times, want once", i, count[id])
			}
			if count[id] > 2 {
				t.Fatalf("record %d arrived %d times, want at most twice", i, count[id])
			}
		}
	})
}

// A relay whose database session is gone (its process died) loses its
// claim at once on PostgreSQL and MySQL: another relay publishes without
// waiting out the lease. On SQLite the lease alone decides.
func TestDeadRelaysClaimIsTakenOverAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		sent := add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
		dead := s.owner("dead", time.Hour)
		if recs, _, err := dead.claim(ctx, 100, nil, nil); err != nil || len(recs) != 2 {
			t.Fatalf("dead relay claimed %d (%v)", len(recs), err)
		}
		next := newRelay(t, c, s, WithRelayID("next"))
		if sw := next.SweepOnce(ctx); sw.Claimed != 0 {
			t.Fatalf("claimed %d records while the holder's session lives", sw.Claimed)
		}
		dead.close() // the process dies; its session ends
		if b.Name == "sqlite" {
			if sw := next.SweepOnce(ctx); sw.Claimed != 0 {
				t.Fatalf("SQLite took over %d records inside the lease", sw.Claimed)
			}
			return
		}
		// The database ends the dead session's backend a moment after its
		// connection closes, and only then lets its lock go: sweep until
		// the records are taken over, within the 2 s the relay promises
		// (the lease is an hour).
		published, sweeps := 0, 0
		for deadline := time.Now().Add(2 * time.Second); published < 2; sweeps++ {
			sw := next.SweepOnce(ctx)
			if sw.Err != nil {
				t.Fatalf("sweep after the holder died: %+v", sw)
			}
			published += sw.Published
			if published < 2 && time.Now().After(deadline) {
				t.Fatalf("%d of 2 records taken over %d sweeps and 2s after the holder's session ended (lease: 1h)", published, sweeps)
			}
		}
		if got := ids(drain(t, c, "orders")); !slices.Equal(got, sent) {
			t.Fatalf("published %v, want %v", got, sent)
		}
	})
}

// Fencing: a relay that lost its claim (its lease ran out while it was
// frozen, and another relay took the records) deletes nothing and spends
// no attempt on records it no longer holds.
func TestRelayThatLostItsClaimWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		clock := &fakeClock{t: time.Now()}
		s.now, s.leaseNow = clock.now, clock.now
		c, _ := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
		frozen := ownerOf(t, s, "frozen")
		recs, _, err := frozen.claim(ctx, 100, nil, nil)
		if err != nil || len(recs) != 2 {
			t.Fatalf("claimed %d (%v)", len(recs), err)
		}
		clock.advance(time.Minute + time.Second)
		other := ownerOf(t, s, "other")
		if got, _, err := other.claim(ctx, 100, nil, nil); err != nil || len(got) != 2 {
			t.Fatalf("the other relay took over %d (%v) after the lease", len(got), err)
		}
		n, err := frozen.published(ctx, []any{recs[0].ID, recs[1].ID})
		if err != nil || n != 0 {
			t.Fatalf("the woken relay deleted %d records it no longer holds (%v)", n, err)
		}
		if held, err := frozen.failed(ctx, recs[0].ID, "nacked"); err != nil || held {
			t.Fatalf("the woken relay spent an attempt on a record it no longer holds (held %v, %v)", held, err)
		}
		p, _ := s.Pending(ctx, 0)
		if len(p) != 2 || p[0].Attempts != 0 || p[0].LockedBy != "other" {
			t.Fatalf("records after the woken relay's writes: %+v", p)
		}
	})
}

// A relay frozen past three quarters of its lease writes nothing more
// when it wakes: the batch's deadline is read from the clock before every
// write.
func TestSweepPastItsLeaseWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
		r := newRelay(t, c, s, WithLockTTL(time.Nanosecond))
		sw := r.SweepOnce(ctx)
		if sw.Published != 0 || sw.Failed != 0 || sw.Err == nil {
			t.Fatalf("sweep past its lease: %+v", sw)
		}
		if got := drain(t, c, "orders"); len(got) != 0 {
			t.Fatalf("%d records published past the lease", len(got))
		}
	})
}

// Two relays given one id are refused: the second cannot take the relay's
// lock, so they never both think they hold the claim.
func TestTwoRelaysWithOneIDAreRefused(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		first := ownerOf(t, s, "same")
		if _, _, err := first.claim(ctx, 100, nil, nil); err != nil {
			t.Fatal(err)
		}
		second := ownerOf(t, s, "same")
		if _, _, err := second.claim(ctx, 100, nil, nil); err == nil || !strings.Contains(err.Error(), "same id") {
			t.Fatalf("second relay with one id: %v", err)
		}
	})
}

// previousSchema is the DDL of the version before the locked_by index
// (copied from store.go at commit 0d77616), the fixture the migration is
// tested against.
func previousSchema(d sqlstore.Dialect) []string {
	cols := `
  id VARCHAR(64) PRIMARY KEY,
  exchange_name VARCHAR(255) NOT NULL,
  routing_key VARCHAR(255) NOT NULL,
  content_type VARCHAR(255) NOT NULL,
  headers TEXT NOT NULL,
  body ` + d.BlobType() + ` NOT NULL,
  created_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error VARCHAR(1000),
  locked_by VARCHAR(64),
  locked_until BIGINT`
	index := `CREATE INDEX IF NOT EXISTS acemq_outbox_attempts_seq ON acemq_outbox (attempts, seq)`
	switch d {
	case sqlstore.PostgreSQL:
		return []string{`CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,` + cols + `)`, index}
	case sqlstore.MySQL:
		return []string{`CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE,
  id VARBINARY(64) PRIMARY KEY,
  exchange_name VARCHAR(255) NOT NULL,
  routing_key VARCHAR(255) NOT NULL,
  content_type VARCHAR(255) NOT NULL,
  headers LONGTEXT NOT NULL,
  body LONGBLOB NOT NULL,
  created_at BIGINT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error VARCHAR(1000),
  locked_by VARBINARY(64),
  locked_until BIGINT,
  INDEX acemq_outbox_attempts_seq (attempts, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`}
	}
	return []string{`CREATE TABLE IF NOT EXISTS acemq_outbox (
  seq BIGINT NOT NULL UNIQUE,` + cols + `)`, index}
}

// EnsureSchema on a table made by the previous version adds the
// locked_by index and keeps the records.
func TestEnsureSchemaAddsTheLockedByIndexToAnOldTable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db, d := b.Open(t)
		for _, stmt := range previousSchema(d) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		s, err := NewStore(db, d)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := memConn(t)
		sent := add(t, s, c, "", "orders", order{"old", 1})
		if has := hasIndex(t, s, "acemq_outbox_locked_by"); has {
			t.Fatal("the fixture already has the index; the test would prove nothing")
		}
		for range 2 {
			if err := s.EnsureSchema(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !hasIndex(t, s, "acemq_outbox_locked_by") {
			t.Fatal("EnsureSchema did not add acemq_outbox_locked_by")
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 1 || p[0].ID != sent[0] {
			t.Fatalf("records after the migration: %+v", p)
		}
	})
}

func hasIndex(t *testing.T, s *Store, name string) bool {
	t.Helper()
	var q string
	switch s.Dialect() {
	case sqlstore.PostgreSQL:
		q = `SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'acemq_outbox' AND indexname = $1`
	case sqlstore.MySQL:
		q = `SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'acemq_outbox' AND INDEX_NAME = ?`
	default:
		q = `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'acemq_outbox' AND name = ?`
	}
	var n int
	if err := s.DB().QueryRowContext(context.Background(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// A record whose headers Go consumers could not read (over
// header.MaxDepth) is refused before anything is written, and that is
// about the record: it spends an attempt (and is retired after
// MaxAttempts) instead of stopping every sweep for good.
func TestRecordWithUnreadableHeadersSpendsAnAttempt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backend{Name: "sqlite", Open: dbtest.SQLite})
	c, _ := memConn(t, "orders")
	deep := map[string]any{"leaf": "x"}
	for range header.MaxDepth + 1 {
		deep = map[string]any{"next": deep}
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, tx, c, "", "orders", order{"deep", 1}, WithHeader("x-deep", deep)); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	add(t, s, c, "", "orders", order{"a", 1})
	r := newRelay(t, c, s)
	sw := r.SweepOnce(ctx)
	if sw.Failed != 1 || sw.Published != 0 || !errors.Is(sw.Err, acemq.ErrHeaderLimit) {
		t.Fatalf("sweep %+v", sw)
	}
	p, _ := s.Pending(ctx, 0)
	if len(p) != 2 || p[0].Attempts != 1 || !strings.Contains(p[0].LastError, "Go consumers") {
		t.Fatalf("pending %+v", p)
	}
	if got := drain(t, c, "orders"); len(got) != 0 {
		t.Fatalf("%d messages written after the refused record; want none (it was first)", len(got))
	}
}

// A record whose publish is over a size limit (a header over frame_max, a
// body over the maximum message size) is about the record: refused before
// anything is written, it spends an attempt instead of stopping every
// sweep for good, and nothing behind it is written out of order.
func TestRecordOverASizeLimitSpendsAnAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  order
		opt  AddOption
		want error
	}{
		{"frame_max", order{"big", 1}, WithHeader("x-big", strings.Repeat("b", 140000)), acemq.ErrHeaderLimit},
		{"max_message_size", order{strings.Repeat("b", 2000), 1}, WithHeader("x-small", "s"), acemq.ErrMessageTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, backend{Name: "sqlite", Open: dbtest.SQLite})
			c, _ := memConn(t, "orders")
			if tc.want == acemq.ErrMessageTooLarge {
				// The same refusal as at 16 MiB, at a size a test handles quickly.
				small, err := acemq.Connect(ctx, "memory://"+dbtest.RandHex(6), acemq.Config{Logger: slog.New(slog.DiscardHandler), MaxMessageSize: 1000})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { small.Close(context.Background()) })
				if err := small.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
					t.Fatal(err)
				}
				c = small
			}
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Add(ctx, tx, c, "", "orders", tc.rec, tc.opt); err != nil {
				tx.Rollback()
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			add(t, s, c, "", "orders", order{"a", 1})
			sw := newRelay(t, c, s).SweepOnce(ctx)
			if sw.Failed != 1 || sw.Published != 0 || !errors.Is(sw.Err, tc.want) {
				t.Fatalf("sweep %+v, want one failure matching %v", sw, tc.want)
			}
			p, _ := s.Pending(ctx, 0)
			if len(p) != 2 || p[0].Attempts != 1 || !strings.Contains(p[0].LastError, "nothing was sent") {
				t.Fatalf("pending %+v", p)
			}
			if got := drain(t, c, "orders"); len(got) != 0 {
				t.Fatalf("%d messages written after the refused record; want none (it was first)", len(got))
			}
		})
	}
}
