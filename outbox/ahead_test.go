package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
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
		sent := addOrders(t, s, c, 5)
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
		if sw := r.sweep(ctx, true); sw.Published != 1 || sw.Failed != 0 || !acemq.IsUnroutable(sw.Err) {
			t.Fatalf("first sweep %+v: want the first record published and the second refused (no attempt: no route yet is an outage)", sw)
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
		sent := addOrders(t, s, c, 6)
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
// the other relays' locks from indexes and scans no table (SQLite without
// statistics, which it has none of unless the application runs ANALYZE;
// PostgreSQL in TestPostgresClaimScansNoTable).
func TestClaimReadsIndexesOnABigBacklog(t *testing.T) {
	b := backendNamed(t, "sqlite")
	t.Run(b.Name, func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t, b)
		// Without statistics SQLite plans alike for any size; 200
		// records keep the test fast under the race detector.
		fill := `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)
INSERT INTO acemq_outbox (seq, id, exchange_name, routing_key, content_type, headers, body, created_at)
SELECT x, 'id-' || x, '', 'q', 'application/json', '{}', x'', 0 FROM c`
		if _, err := s.DB().ExecContext(ctx, fill); err != nil {
			t.Fatal(err)
		}
		now := int64(1_000_000)
		plan := planLines(t, s.DB(), `EXPLAIN QUERY PLAN `+fmt.Sprintf(claimSQL, "?", sqlstore.SQLite.NowMillis()), "r", now, int64(60_000), MaxAttempts, int64(-1), 100, "r", "r", now)
		// "SCAN acemq_outbox USING INDEX ..." walks the seq index in
		// order up to the LIMIT; a bare SCAN reads the table.
		if len(plan) == 0 || slices.ContainsFunc(plan, func(l string) bool {
			return strings.HasPrefix(strings.TrimSpace(l), "SCAN acemq_outbox") && !strings.Contains(l, "USING")
		}) {
			t.Fatalf("the claim's plan scans the table:\n%s", strings.Join(plan, "\n"))
		}
	})
}

// On PostgreSQL the claim, run on the relay's own session on 20,000
// stored records, reads no table whole and sorts nothing, whatever the
// statistics (gathered on the fresh records; none at all, as for a table
// filled since autovacuum's last ANALYZE; gathered while the relay held
// most of them) and whether PostgreSQL plans it for its parameters or
// once for all (the generic plan a prepared statement settles on). Each
// of those plans once read the whole table: the holder test with
// statistics that had seen the relay's locks (8 ms a claim), the batch's
// choice and lookup without statistics (a relay 16 s behind at 1,000
// records/s). The plans are read with EXPLAIN ANALYZE, run and rolled
// back, so that a scan the plan holds for another relay's locks, and
// never runs while there are none, passes.
func TestPostgresClaimScansNoTable(t *testing.T) {
	b := backendNamed(t, "postgres")
	for _, stats := range []string{"fresh", "none", "locked"} {
		for _, mode := range []string{"custom", "generic"} {
			t.Run(stats+"/"+mode, func(t *testing.T) {
				ctx := context.Background()
				s := newStore(t, b)
				db := s.DB()
				exec := func(q string) {
					t.Helper()
					if _, err := db.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				exec(`ALTER TABLE acemq_outbox SET (autovacuum_enabled = off)`)
				exec(`INSERT INTO acemq_outbox (id, exchange_name, routing_key, content_type, headers, body, created_at)
SELECT 'id-' || x, '', 'q', 'application/json', '{}', ''::bytea, 0 FROM generate_series(1, 20000) x`)
				now := int64(1_000_000)
				switch stats {
				case "fresh":
					exec(`ANALYZE acemq_outbox`)
				case "locked":
					exec(fmt.Sprintf(`UPDATE acemq_outbox SET locked_by = 'r', locked_until = %d`, now+60_000))
					exec(`ANALYZE acemq_outbox`)
					exec(`UPDATE acemq_outbox SET locked_by = NULL, locked_until = NULL WHERE seq > 200`)
				}
				o := s.owner("r", time.Minute)
				defer o.close()
				if _, err := o.session(ctx); err != nil {
					t.Fatal(err)
				}
				tx, err := o.conn.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback() //nolint:errcheck // the claim is not kept
				done := []int64{}
				skip := []int64{-1}
				if stats == "locked" {
					for i := int64(1); i <= 100; i++ {
						done = append(done, i)
						skip = append(skip, i, i+100)
					}
				}
				claim := fmt.Sprintf(pgClaimSQL, MaxAttempts, 100)
				var plan []string
				if mode == "custom" {
					plan = planLines(t, tx, `EXPLAIN (ANALYZE, COSTS OFF) `+claim, "r", int64(60_000), skip, done, nil, len(done)) // nil: the database's clock
				} else {
					for _, q := range []string{`SET LOCAL plan_cache_mode = force_generic_plan`, `PREPARE claim(text, bigint, bigint[], bigint[], bigint, bigint) AS ` + claim} {
						if _, err := tx.ExecContext(ctx, q); err != nil {
							t.Fatal(err)
						}
					}
					defer o.conn.ExecContext(ctx, `DEALLOCATE claim`) //nolint:errcheck // the session ends with the test
					array := func(v []int64) string {
						return "'{" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(v)), ","), "[]") + "}'"
					}
					plan = planLines(t, tx, fmt.Sprintf(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE claim('r', %d, %s, %s, NULL, %d)`, 60_000, array(skip), array(done), len(done)))
				}
				text := strings.Join(plan, "\n")
				if slices.ContainsFunc(plan, func(l string) bool {
					return (strings.Contains(l, "Seq Scan on acemq_outbox") || strings.Contains(l, "Sort")) && !strings.Contains(l, "never executed")
				}) {
					t.Fatalf("the claim scanned the table or sorted:\n%s", text)
				}
				if !strings.Contains(text, "Update on acemq_outbox") || !strings.Contains(text, "rows=100 loops=1") {
					t.Fatalf("the claim did not take a batch of 100:\n%s", text)
				}
			})
		}
	}
}

// planLines runs an EXPLAIN and returns its lines.
func planLines(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, explain string, args ...any) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), explain, args...)
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
	return plan
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
		sent := addOrders(t, s, c, 6)
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

// A relay stopped while its sweep's database work runs (the claim ahead,
// the delete of the batch before) waits for it, then deletes every record
// it published before it lets its locks go: each record is either on the
// queue and deleted, or still stored and not on the queue, and the
// observer counted every delete.
func TestStoppingRelayFinishesItsDatabaseWork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		sent := addOrders(t, s, c, 20)
		var deleted atomic.Int64
		r := newRelay(t, c, s, WithBatchSize(2), WithObserver(func(sw Sweep) { deleted.Add(int64(sw.Published)) }))
		gate := make(chan struct{})
		claiming := make(chan struct{}, 1)
		var claims atomic.Int32
		r.beforeClaim = func() {
			if claims.Add(1) == 5 { // the pipeline is full by now
				claiming <- struct{}{}
				<-gate
			}
		}
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		<-claiming
		closed := make(chan error, 1)
		go func() { closed <- r.Close(ctx) }()
		close(gate)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		queued := ids(drain(t, c, "orders"))
		p, err := s.Pending(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		stored := recIDs(p)
		if len(queued) == 0 || !slices.Equal(queued, sent[:len(queued)]) || !slices.Equal(stored, sent[len(queued):]) {
			t.Fatalf("queue %v, still stored %v; want a prefix of %v on the queue and the rest stored", queued, stored, sent)
		}
		if int(deleted.Load()) != len(queued) {
			t.Fatalf("the observer counted %d deleted, %d were published", deleted.Load(), len(queued))
		}
		for _, rec := range p {
			if rec.LockedBy != "" {
				t.Fatalf("record %s still locked by %q after Close", rec.ID, rec.LockedBy)
			}
		}
	})
}

// A relay whose context ends while its goroutine deletes the batch that
// went through (on PostgreSQL in the claim's statement) still deletes it,
// as a delete on its own does: those records were published, and left
// stored they would go out twice.
func TestRelayStoppingDuringTheClaimDeletesWhatWentThrough(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		sent := addOrders(t, s, c, 8)
		r := newRelay(t, c, s, WithBatchSize(2))
		if sw := r.sweep(context.Background(), true); sw.Err != nil || len(r.behind) != 2 {
			t.Fatalf("first sweep %+v, left %d to delete; want its batch left for the next sweep", sw, len(r.behind))
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r.beforeClaim = cancel // the relay stops as its goroutine starts the claim
		r.sweep(ctx, true)
		p, err := s.Pending(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range p {
			if rec.ID == sent[0] || rec.ID == sent[1] {
				t.Fatalf("still stored after the stop: %v; want the first batch, which went through, deleted", recIDs(p))
			}
		}
	})
}
