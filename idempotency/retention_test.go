package idempotency

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency/internal/dbtest"
)

// The window is the store's: a confirmed key answers Duplicate for the
// retention and is forgotten after it, whether or not a prune ran (the
// message then runs again); a prune never removes a key within its window,
// whatever cut-off it is given. Before, Claim answered Duplicate for a
// confirmed key whatever its expires_at, and Prune removed confirmed keys
// recorded before any cut-off, so the window was whatever the prune job
// made it.
func TestAConfirmedKeyAnswersDuplicateForTheRetentionThenRunsAgain(t *testing.T) {
	opens := map[string]func(t *testing.T, now func() time.Time) Store{
		"memory": func(_ *testing.T, now func() time.Time) Store {
			s := NewMemoryStore(WithRetention(time.Hour))
			s.now = now
			return s
		},
	}
	for _, b := range dbtest.Dialects {
		opens[b.Name] = func(t *testing.T, now func() time.Time) Store {
			db, d := b.Open(t)
			s, err := NewSQLStore(db, d, WithRetention(time.Hour))
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
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := &clock{t: time.Now()}
			s := open(t, c.now)
			cl, err := s.Claim(ctx, "order-7", time.Minute)
			if err != nil || cl.Outcome != Claimed {
				t.Fatalf("claim %+v %v", cl, err)
			}
			if err := s.Confirm(ctx, "order-7", cl.Token); err != nil {
				t.Fatal(err)
			}
			c.advance(59 * time.Minute)
			if x, err := s.Claim(ctx, "order-7", time.Minute); err != nil || x.Outcome != Duplicate {
				t.Fatalf("within the retention: %+v %v", x, err)
			}
			if n, err := s.Prune(ctx, c.now().Add(1000*time.Hour)); err != nil || n != 0 {
				t.Fatalf("a prune removed %d keys (%v) within their window", n, err)
			}
			c.advance(2 * time.Minute) // the retention ended, no prune ran
			again, err := s.Claim(ctx, "order-7", time.Minute)
			if err != nil || again.Outcome != Claimed {
				t.Fatalf("after the retention: %+v %v, want the key forgotten (Claimed)", again, err)
			}
			if err := s.Confirm(ctx, "order-7", again.Token); err != nil {
				t.Fatal(err)
			}
			if x, _ := s.Claim(ctx, "order-7", time.Minute); x.Outcome != Duplicate {
				t.Fatalf("confirmed again: %+v", x)
			}
		})
	}
}

// Transactional keeps its keys for its retention (RetainFor): a key whose
// window ended (its row's expires_at in the past, as time would make it)
// is forgotten and the message runs again.
func TestTransactionalForgetsAKeyWhoseRetentionEnded(t *testing.T) {
	for _, b := range dbtest.Dialects {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			db, d := b.Open(t)
			if err := EnsureSchema(ctx, db, d); err != nil {
				t.Fatal(err)
			}
			runs := 0
			h := Transactional(db, d, func(ctx context.Context, tx *sql.Tx, m *acemq.Message[string]) acemq.Decision {
				runs++
				return acemq.Accept()
			}, RetainFor[string](time.Hour))
			m := &acemq.Message[string]{Envelope: acemq.NewEnvelope()}
			for range 2 {
				if dec := h(ctx, m); dec.String() != "accept" {
					t.Fatalf("decision %v", dec)
				}
			}
			if runs != 1 {
				t.Fatalf("ran %d times within the retention, want 1", runs)
			}
			var until int64
			if err := db.QueryRowContext(ctx, d.Rebind(`SELECT expires_at FROM acemq_idempotency WHERE message_id = ?`), m.Envelope.ID).Scan(&until); err != nil {
				t.Fatal(err)
			}
			if left := time.Until(time.UnixMilli(until)); left < 59*time.Minute || left > 61*time.Minute {
				t.Fatalf("the key is kept for %v, want the hour RetainFor gave", left)
			}
			if _, err := db.ExecContext(ctx, d.Rebind(`UPDATE acemq_idempotency SET expires_at = ? WHERE message_id = ?`), time.Now().Add(-time.Second).UnixMilli(), m.Envelope.ID); err != nil {
				t.Fatal(err)
			}
			if dec := h(ctx, m); dec.String() != "accept" || runs != 2 {
				t.Fatalf("after the retention: %v, %d runs, want it run again", dec, runs)
			}
		})
	}
}

// PruneEvery prunes a store periodically until its context ends.
func TestPruneEveryPrunesUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &clock{t: time.Now().Add(-3 * time.Hour)}
	s := NewMemoryStore(WithRetention(time.Hour))
	s.now = c.now
	cl, _ := s.Claim(ctx, "old", time.Minute)
	if err := s.Confirm(ctx, "old", cl.Token); err != nil {
		t.Fatal(err)
	}
	c.advance(3 * time.Hour) // the key's window ended two hours ago
	pruned := make(chan int, 16)
	done := make(chan error, 1)
	go func() {
		done <- PruneEvery(ctx, s, 10*time.Millisecond, func(n int, err error) {
			if err == nil && n > 0 {
				pruned <- n
			}
		})
	}()
	select {
	case n := <-pruned:
		if n != 1 {
			t.Fatalf("pruned %d", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("PruneEvery pruned nothing in 20 s")
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("PruneEvery returned %v, want context.Canceled", err)
	}
	if err := PruneEvery(context.Background(), s, 0, nil); err == nil {
		t.Fatal("a zero interval was accepted")
	}
}
