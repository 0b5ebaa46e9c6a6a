package outbox

import (
	"bytes"
	"context"
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

// Run's sweeps claim the next batch while a full batch is on the wire, and
// the next sweep publishes that batch without claiming again; the queue
// still holds every record once, in seq order.
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
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("first sweep %+v", sw)
		}
		if got := recIDs(r.next.recs); !slices.Equal(got, sent[2:4]) {
			t.Fatalf("claimed ahead %v, want the next batch %v", got, sent[2:4])
		}
		p, err := s.Pending(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 3 || p[0].LockedBy != r.ID() || p[1].LockedBy != r.ID() || p[2].LockedBy != "" {
			t.Fatalf("pending after the first sweep: %+v; want the next batch locked by the relay and the last record free", p)
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Claimed != 2 || sw.Published != 2 {
			t.Fatalf("second sweep %+v", sw)
		}
		if got := recIDs(r.next.recs); !slices.Equal(got, sent[4:]) {
			t.Fatalf("claimed ahead %v, want %v", got, sent[4:])
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 1 || r.next.recs != nil {
			t.Fatalf("third sweep %+v, claimed ahead %d (a batch that is not full claims nothing ahead)", sw, len(r.next.recs))
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
		top := acemq.NewTopology().Exchange("shop", acemq.Direct).Queue("orders", acemq.AsClassic()).Bind("orders", "shop", "k")
		if err := c.Apply(ctx, top); err != nil {
			t.Fatal(err)
		}
		var sent []string
		for i := range 6 {
			key := "k"
			if i == 1 {
				key = "k1" // unroutable until bound below
			}
			sent = append(sent, add(t, s, c, "shop", key, order{fmt.Sprint(i), i})...)
		}
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
		for published := 1; published < len(sent); {
			sw := r.sweep(ctx, true)
			if sw.Err != nil {
				t.Fatalf("sweep %+v", sw)
			}
			if sw.Published == 0 {
				t.Fatalf("a sweep published nothing with %d records left", len(sent)-published)
			}
			published += sw.Published
		}
		got := ids(drain(t, c, "orders"))
		if got[0] != sent[0] || !slices.Equal(lastCopies(got), sent) {
			t.Fatalf("queue %v; want %s first and last copies in seq order %v", got, sent[0], sent)
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

// The batch claimed ahead is the first records but the batch on the wire,
// not the records after its last seq: a record whose transaction took a
// lower seq and committed after the batch was claimed goes out in the
// next batch, not after the whole backlog (server databases, where
// transactions overlap).
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
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("first sweep %+v", sw)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if sw := r.sweep(ctx, true); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("second sweep %+v", sw)
		}
		if got, want := recIDs(r.next.recs), []string{late.ID, sent[4]}; !slices.Equal(got, want) {
			t.Fatalf("claimed ahead %v, want the late record first %v", got, want)
		}
	})
}
