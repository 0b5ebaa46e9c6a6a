package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

// recIDs lists the ids of recs.
func recIDs(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// Run's sweeps claim the next batch while a full batch is on the wire
// (and, that one being full too, the batch after it, which the next sweep
// writes as it starts), and the next sweep publishes them without
// claiming them again; the queue still holds every record once, in seq
// order.
func TestRunsSweepClaimsTheNextBatchAhead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		var sent []string
		for i := range 5 {
			sent = append(sent, add(t, s, c, "", "orders", order{fmt.Sprint(i), i})...)
		}
		r := newRelay(t, c, s, WithBatchSize(2))
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 0 {
			t.Fatalf("first sweep %+v; want its batch left for the next sweep to delete", sw)
		}
		if got := recIDs(r.next.recs); !slices.Equal(got, sent[2:4]) {
			t.Fatalf("claimed ahead %v, want the next batch %v", got, sent[2:4])
		}
		if got := recIDs(r.later.recs); !slices.Equal(got, sent[4:]) || r.later.out != nil {
			t.Fatalf("claimed after it %v (written: %v), want the batch after %v, not written", got, r.later.out != nil, sent[4:])
		}
		if got := recIDs(r.behind); !slices.Equal(got, sent[:2]) {
			t.Fatalf("left to delete %v, want the first batch %v", got, sent[:2])
		}
		p, err := s.Pending(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 5 || p[3].LockedBy != r.ID() || p[4].LockedBy != r.ID() {
			t.Fatalf("pending after the first sweep: %+v; want every batch locked by the relay", p)
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Claimed != 2 || sw.Published != 2 {
			t.Fatalf("second sweep %+v; want the first batch deleted", sw)
		}
		if got := recIDs(r.next.recs); !slices.Equal(got, sent[4:]) || r.next.out == nil || r.later.recs != nil {
			t.Fatalf("on the wire behind the batch %v (written: %v), claimed after it %d; want %v written and nothing more", got, r.next.out != nil, len(r.later.recs), sent[4:])
		}
		if p, err := s.Pending(ctx, 0); err != nil || !slices.Equal(recIDs(p), sent[2:]) {
			t.Fatalf("pending after the second sweep: %v (%v); want %v", recIDs(p), err, sent[2:])
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 3 || r.next.recs != nil || r.behind != nil {
			t.Fatalf("third sweep %+v, claimed ahead %d, left %d (nothing is left to claim ahead, so the sweep deletes its own batch)", sw, len(r.next.recs), len(r.behind))
		}
		if p, err := s.Pending(ctx, 0); err != nil || len(p) != 0 {
			t.Fatalf("pending after the last sweep: %v (%v)", recIDs(p), err)
		}
		if got := ids(drain(t, c, "orders")); !slices.Equal(got, sent) {
			t.Fatalf("queue %v, want %v", got, sent)
		}
	})
}

// A sweep that failed drops the batch it claimed ahead; the next sweep
// claims from the first stored record again, so the order rule holds as
// for one batch: the records before the failure first, last copies in seq
// order.
func TestFailedSweepDropsTheBatchClaimedAhead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		top, sent := ordersWithOneUnroutable(t, s, c, 6, 1) // record 1 unroutable until bound below
		r := newRelay(t, c, s, WithBatchSize(3))
		if sw := r.sweep(ctx, true); sw.Published != 1 || sw.Failed != 1 || !acemq.IsUnroutable(sw.Err) {
			t.Fatalf("first sweep %+v: want the first record published and the second failed", sw)
		}
		if r.next.recs != nil {
			t.Fatalf("a failed sweep kept %d records claimed ahead", len(r.next.recs))
		}
		if err := c.Apply(ctx, top.Bind("orders", "shop", "k1")); err != nil {
			t.Fatal(err)
		}
		for published, sweeps := 1, 0; published < len(sent); sweeps++ {
			sw := r.sweep(ctx, true)
			if sw.Err != nil {
				t.Fatalf("sweep %+v", sw)
			}
			if sweeps > len(sent) {
				t.Fatalf("%d sweeps published only %d of %d records", sweeps, published, len(sent))
			}
			published += sw.Published
		}
		got := ids(drain(t, c, "orders"))
		if got[0] != sent[0] || !slices.Equal(lastCopies(got), sent) {
			t.Fatalf("queue %v; want %s first and last copies in seq order %v", got, sent[0], sent)
		}
	})
}

// The next sweep deletes a batch that went through while its own batch is
// on the wire. When that delete fails, the sweep deletes none of its own
// batch either: both go out again, from the first, so last copies stay in
// seq order.
func TestFailedDeleteOfTheBatchBehindDeletesNothingAfterIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		var sent []string
		for i := range 6 {
			sent = append(sent, add(t, s, c, "", "orders", order{fmt.Sprint(i), i})...)
		}
		r := newRelay(t, c, s, WithBatchSize(2))
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 0 || len(r.behind) != 2 {
			t.Fatalf("first sweep %+v, left %d to delete", sw, len(r.behind))
		}
		r.afterConfirm = func(string) error { return errors.New("the database went away") }
		sw := r.sweep(ctx, true)
		if sw.Err == nil || !strings.Contains(sw.Err.Error(), "were published but not marked") || sw.Published != 0 {
			t.Fatalf("second sweep %+v; want the failed delete reported", sw)
		}
		if r.next.recs != nil || r.behind != nil {
			t.Fatalf("after a failed delete the relay kept %d claimed ahead and %d to delete", len(r.next.recs), len(r.behind))
		}
		if p, err := s.Pending(ctx, 0); err != nil || !slices.Equal(recIDs(p), sent) {
			t.Fatalf("pending %v (%v); want every record still stored %v", recIDs(p), err, sent)
		}
		r.afterConfirm = nil
		for sweeps := 0; ; sweeps++ {
			if sw := r.sweep(ctx, true); sw.Err != nil {
				t.Fatalf("sweep %+v", sw)
			}
			p, err := s.Pending(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(p) == 0 {
				break
			}
			if sweeps > 10 {
				t.Fatalf("still pending after %d sweeps: %v", sweeps, recIDs(p))
			}
		}
		got := ids(drain(t, c, "orders"))
		if !slices.Equal(got[:4], sent[:4]) || !slices.Equal(lastCopies(got), sent) {
			t.Fatalf("queue %v; want %v first, then last copies in seq order %v", got, sent[:4], sent)
		}
	})
}

// A sweep cut short because the relay is stopping reports ctx's error and
// logs nothing: stopping is not a failure.
func TestStoppingRelayLogsNoFailure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"1", 1})
		var buf bytes.Buffer
		r := newRelay(t, c, s, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if sw := r.sweep(ctx, true); sw.Err != context.Canceled {
			t.Fatalf("sweep of a stopping relay: %+v; want context.Canceled itself", sw)
		}
		if buf.Len() != 0 {
			t.Fatalf("a stopping relay logged:\n%s", buf.String())
		}
	})
}

// The claim stays cheap on a big backlog: its plan reads the batch and
// the other relays' locks from indexes and scans no table (SQLite, and
// PostgreSQL on 20,000 stored records; a scan was 19 ms a claim on PostgreSQL
// at this size, growing with the backlog). PostgreSQL's plan is read with
// statistics (autovacuum gathers them), SQLite's without (it has none
// unless the application runs ANALYZE).
func TestClaimReadsIndexesOnABigBacklog(t *testing.T) {
	for _, b := range backends {
		if b.Name == "mysql" {
			continue // the MySQL claim reads by id; its plans are InnoDB's
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, b)
			var fill, explain, scan string
			var args []any
			now := int64(1_000_000)
			switch b.Name {
			case "postgres":
				fill = `INSERT INTO acemq_outbox (id, exchange_name, routing_key, content_type, headers, body, created_at)
SELECT 'id-' || x, '', 'q', 'application/json', '{}', ''::bytea, 0 FROM generate_series(1, 20000) x`
				explain = `EXPLAIN ` + pgClaimSQL
				args = []any{"r", now + 60_000, MaxAttempts, 100, now, []int64{-1}}
				scan = "Seq Scan on acemq_outbox" // PostgreSQL indents plan lines
			default:
				// Without statistics SQLite plans alike for any size; 200
				// records keep the test fast under the race detector.
				fill = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)
INSERT INTO acemq_outbox (seq, id, exchange_name, routing_key, content_type, headers, body, created_at)
SELECT x, 'id-' || x, '', 'q', 'application/json', '{}', x'', 0 FROM c`
				explain = `EXPLAIN QUERY PLAN ` + fmt.Sprintf(claimSQL, "?")
				args = []any{"r", now + 60_000, MaxAttempts, int64(-1), 100, "r", "r", now}
				scan = "SCAN acemq_outbox"
			}
			if _, err := s.DB().ExecContext(ctx, fill); err != nil {
				t.Fatal(err)
			}
			if b.Name == "postgres" {
				// Autovacuum gathers statistics on PostgreSQL; SQLite has
				// none unless asked, and the planner decides without.
				if _, err := s.DB().ExecContext(ctx, `ANALYZE acemq_outbox`); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := s.DB().QueryContext(ctx, explain, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var plan []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			// SQLite's "SCAN acemq_outbox USING INDEX ..." walks the seq
			// index in order up to the LIMIT; a bare SCAN reads the table.
			scans := slices.ContainsFunc(plan, func(l string) bool {
				return strings.HasPrefix(strings.TrimSpace(l), scan) && !strings.Contains(l, "USING")
			})
			if len(plan) == 0 || scans {
				t.Fatalf("the claim's plan scans the table:\n%s", text)
			}
			t.Logf("plan:\n%s", text)
		})
	}
}

// The batch claimed ahead is the first records but the batches on the
// wire or claimed, not the records after the last seq: a record whose
// transaction took a lower seq and committed after those batches were
// claimed goes out in the next batch claimed, not after the whole backlog
// (server databases, where transactions overlap).
func TestBatchClaimedAheadTakesARecordThatCommittedLate(t *testing.T) {
	forEachServerBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // committed below
		late, err := s.Add(ctx, tx, c, "", "orders", order{"late", 0})
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for i := range 6 {
			sent = append(sent, add(t, s, c, "", "orders", order{fmt.Sprint(i), i})...)
		}
		r := newRelay(t, c, s, WithBatchSize(2))
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 0 || len(r.behind) != 2 {
			t.Fatalf("first sweep %+v", sw)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("second sweep %+v", sw)
		}
		if got, want := recIDs(r.next.recs), sent[4:]; !slices.Equal(got, want) {
			t.Fatalf("on the wire behind the batch %v, want the batch claimed before the commit %v", got, want)
		}
		if got, want := recIDs(r.later.recs), []string{late.ID}; !slices.Equal(got, want) {
			t.Fatalf("claimed ahead %v, want the late record %v", got, want)
		}
	})
}
