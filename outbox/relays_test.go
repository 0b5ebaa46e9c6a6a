package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// Many relays claiming at once, again and again, never both get records:
// on PostgreSQL the claims that lose to the first one's commit fail on
// its changes (REPEATABLE READ) and claim nothing, on MySQL they wait for
// the claim lock (GET_LOCK) and then see its locks. (SQLite's single writer makes claims
// one at a time by construction; the test cost it seconds to show that.)
func TestConcurrentClaimsNeverShareTheOutbox(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		for i := range 200 {
			add(t, s, c, "", "orders", order{fmt.Sprint(i), i})
		}
		for round := range 30 {
			var wg sync.WaitGroup
			winners := make(chan string, 8)
			owners := map[string]*owner{}
			for r := range 8 {
				name := fmt.Sprintf("relay-%d-%d", round, r)
				owners[name] = s.owner(name, time.Minute)
			}
			for name, o := range owners {
				wg.Add(1)
				go func() {
					defer wg.Done()
					recs, _, err := o.claim(ctx, 100, nil, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if len(recs) > 0 {
						winners <- name
					}
				}()
			}
			wg.Wait()
			close(winners)
			var won []string
			for w := range winners {
				won = append(won, w)
			}
			if len(won) != 1 {
				t.Fatalf("round %d: %d relays claimed at once: %v", round, len(won), won)
			}
			if err := owners[won[0]].unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for _, o := range owners {
				o.close()
			}
		}
	})
}

// Two relays running against one table publish every record once, in
// order (on the database servers; see above for SQLite).
func TestTwoRelaysPublishEveryRecordOnceInOrder(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c1, name := memConn(t, "orders")
		c2, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close(ctx)
		const n = 350
		var sent []string
		for i := range n {
			sent = append(sent, add(t, s, c1, "", "orders", order{fmt.Sprint(i), i})...)
		}
		sweeps := make(chan Sweep, 1024)
		observe := WithObserver(func(sw Sweep) {
			select {
			case sweeps <- sw:
			default:
			}
		})
		r1 := newRelay(t, c1, s, WithRelayID("r1"), WithInterval(5*time.Millisecond), observe)
		r2 := newRelay(t, c2, s, WithRelayID("r2"), WithInterval(5*time.Millisecond), observe)
		var wg sync.WaitGroup
		for _, r := range []*Relay{r1, r2} {
			wg.Add(1)
			go func() { defer wg.Done(); _ = r.Run(ctx) }()
		}
		published := 0
		deadline := time.After(30 * time.Second)
		for published < n {
			select {
			case sw := <-sweeps:
				if sw.Err != nil {
					t.Errorf("sweep error: %v", sw.Err)
				}
				published += sw.Published
			case <-deadline:
				t.Fatalf("only %d of %d published", published, n)
			}
		}
		for _, r := range []*Relay{r1, r2} {
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if published != n {
			t.Fatalf("relays reported %d publishes for %d records", published, n)
		}
		got := ids(drain(t, c1, "orders"))
		if !slices.Equal(got, sent) {
			t.Fatalf("queue holds %d messages; want the %d records once each, in order", len(got), n)
		}
		if p, _ := s.Pending(ctx, 0); len(p) != 0 {
			t.Fatalf("%d records left", len(p))
		}
	})
}

// A producer's transaction that called Add and has not committed holds up
// neither a relay's claim of the records already committed nor its unlock
// (on MySQL both scan the table, and under InnoDB's REPEATABLE READ they
// waited for the producer's row lock until it committed).
func TestOpenAddTransactionHoldsUpNoRelay(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		committed := add(t, s, c, "", "orders", order{"a", 1})
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := s.Add(ctx, tx, c, "", "orders", order{"open", 2}); err != nil {
			t.Fatal(err)
		}
		bound, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r1 := ownerOf(t, s, "r1")
		recs, _, err := r1.claim(bound, 100, nil, nil)
		if err != nil || len(recs) != 1 || recs[0].ID != committed[0] {
			t.Fatalf("claim beside an open Add: %d records, %v; want the committed one at once", len(recs), err)
		}
		if err := r1.unlock(bound); err != nil {
			t.Fatalf("unlock beside an open Add: %v", err)
		}
	})
}

// A claim that loses a race on PostgreSQL (records it would change were
// changed by another transaction after its snapshot) fails, and changes
// nothing: with nothing to delete that is no batch and no error — another
// relay claimed first, and keeps what it claimed; with the relay's
// confirmed batch to delete it is the claim's error, and that batch is
// still stored. The race is made certain by opening the losing relay's
// snapshot (a transaction on its session) before the other change commits.
func TestPostgresClaimThatLosesARaceChangesNothing(t *testing.T) {
	b := backendNamed(t, "postgres")
	for _, deleting := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleting=%v", deleting), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, b)
			c, _ := memConn(t)
			for i := range 6 {
				add(t, s, c, "", "orders", order{fmt.Sprint(i), i})
			}
			loser := s.owner("relay-a", time.Minute)
			defer loser.close()
			var done []int64
			if deleting {
				recs, _, err := loser.claim(ctx, 2, nil, nil)
				if err != nil || len(recs) != 2 {
					t.Fatalf("first claim: %d records, %v", len(recs), err)
				}
				done = []int64{recs[0].Seq, recs[1].Seq}
			} else if _, err := loser.session(ctx); err != nil {
				t.Fatal(err)
			}
			var one int
			if _, err := loser.conn.ExecContext(ctx, `BEGIN`); err != nil {
				t.Fatal(err)
			}
			if err := loser.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
				t.Fatal(err)
			}
			winner := s.owner("relay-b", time.Minute)
			defer winner.close()
			if deleting {
				// Another transaction changes the records the claim takes next.
				if _, err := s.DB().ExecContext(ctx, `UPDATE acemq_outbox SET attempts = attempts WHERE seq > $1`, done[1]); err != nil {
					t.Fatal(err)
				}
			} else if recs, _, err := winner.claim(ctx, 2, nil, nil); err != nil || len(recs) != 2 {
				t.Fatalf("the winner's claim: %d records, %v", len(recs), err)
			}
			recs, deleted, err := loser.claim(ctx, 2, done, done)
			if len(recs) != 0 || deleted != 0 {
				t.Fatalf("the losing claim took %d records and deleted %d", len(recs), deleted)
			}
			if deleting {
				if err == nil {
					t.Fatal("a claim that lost its delete to another transaction reported no error")
				}
			} else {
				if err != nil {
					t.Fatalf("a claim that lost to another relay's: %v; want no batch and no error", err)
				}
				if _, err := loser.conn.ExecContext(ctx, `ROLLBACK`); err != nil {
					t.Fatal(err)
				}
			}
			var held, stored int
			if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE locked_by = 'relay-b'), count(*) FROM acemq_outbox`).Scan(&held, &stored); err != nil {
				t.Fatal(err)
			}
			if wantHeld := map[bool]int{false: 2, true: 0}[deleting]; held != wantHeld || stored != 6 {
				t.Fatalf("after the race: relay-b holds %d (want %d), %d stored (want 6)", held, wantHeld, stored)
			}
		})
	}
}
