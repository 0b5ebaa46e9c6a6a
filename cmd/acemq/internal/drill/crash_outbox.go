package drill

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx" for the outbox variant's PostgreSQL URL

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/sqlstore"
)

// outboxLockTTL is the claim lease of the drill's relays: a killed relay's
// claim expires this long after it was taken, and the next relay takes the
// records over. Short, so the drill does not wait out the default.
const outboxLockTTL = 2 * time.Second

// withSearchPath adds search_path=schema to a PostgreSQL URL (pgx passes
// unknown parameters to the server as run-time settings).
func withSearchPath(dsn, schema string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}

func openOutbox(ctx context.Context, dsn string) (*sql.DB, *outbox.Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, nil, err
	}
	store, err := outbox.NewStore(db, sqlstore.PostgreSQL)
	if err == nil {
		err = store.EnsureSchema(ctx)
	}
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("acemq: cannot open the outbox in %s: %w", dsn, err)
	}
	return db, store, nil
}

// outboxChild is the outbox variant's child: produce adds one record per
// transaction and records "committed ID" once the commit returned nil;
// relay runs a relay until killed.
func outboxChild(ctx context.Context, mode, url, db, queue string, rec *record) error {
	c, err := Env{URL: url}.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	sdb, store, err := openOutbox(ctx, db)
	if err != nil {
		return err
	}
	defer sdb.Close()
	switch mode {
	case "outbox-produce":
		for seq := 0; ctx.Err() == nil; seq++ {
			tx, err := sdb.BeginTx(ctx, nil)
			if err != nil {
				continue
			}
			env, err := store.Add(ctx, tx, c, "", queue, crashMsg{Seq: seq})
			if err != nil {
				_ = tx.Rollback()
				continue
			}
			if err := tx.Commit(); err != nil {
				continue
			}
			if err := rec.line("committed", env.ID); err != nil {
				return err
			}
		}
		return nil
	case "outbox-relay":
		r, err := outbox.NewRelay(c, store, outbox.WithLockTTL(outboxLockTTL), outbox.WithBatchSize(50),
			outbox.WithLogger(slog.New(slog.DiscardHandler)), outbox.WithObserver(func(sw outbox.Sweep) {
				if sw.Published > 0 {
					_ = rec.line("relayed", fmt.Sprint(sw.Published))
				}
			}))
		if err != nil {
			return err
		}
		err = r.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return fmt.Errorf("acemq: unknown drill child mode %q", mode)
}

// CrashOutbox runs the crash drill's outbox variant on PostgreSQL (db, a
// postgres:// URL; the drill works in a schema of its own and drops it): a
// child producer adding one outbox record per transaction, with no relay,
// is SIGKILLed o.Kills times (every kill lands after some commits and
// before any relay); then a child relay working through that backlog is
// SIGKILLed o.Kills times at random moments (some land between a publish
// and its delete); a last relay finishes the outbox. Every committed
// record must be on the queue at least once; records published twice are
// reported.
func CrashOutbox(ctx context.Context, env Env, db string, o CrashOptions) *Result {
	o.defaults()
	res := newResult("crash-outbox")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if err := crashOutbox(ctx, env, db, o, res); err != nil {
		res.Failf("%v", err)
	}
	return res
}

func crashOutbox(ctx context.Context, env Env, db string, o CrashOptions, res *Result) error {
	if db == "" {
		return fmt.Errorf("acemq: the outbox variant needs a PostgreSQL URL; pass --db postgres://user@host/db")
	}
	dir, cleanup, err := o.dir()
	if err != nil {
		return err
	}
	defer cleanup()
	admin, err := sql.Open("pgx", db)
	if err != nil {
		return err
	}
	defer admin.Close()
	schema := strings.ReplaceAll(unique("acemq_drill_outbox"), ".", "_")
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("acemq: cannot create the drill's schema in %s: %w", db, err)
	}
	defer admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	dsn := withSearchPath(db, schema)
	sdb, store, err := openOutbox(ctx, dsn)
	if err != nil {
		return err
	}
	defer sdb.Close()
	c, err := env.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := unique("drill.crash.outbox")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer c.DeleteQueue(context.Background(), q)
	path := filepath.Join(dir, "outbox.record")
	args := func(mode string) []string {
		return []string{"--mode", mode, "--url", env.URL, "--db", dsn, "--queue", q, "--record", path}
	}
	for i := 0; i < o.Kills; i++ {
		from := countKind(path, "committed")
		r, err := startChild(o, args("outbox-produce")...)
		if err != nil {
			return err
		}
		if err := waitProgress(ctx, r, path, "committed", from); err != nil {
			r.kill()
			return fmt.Errorf("producer life %d: %v", i+1, err)
		}
		_ = sleepCtx(ctx, time.Duration(rand.Int64N(int64(o.MaxLife))))
		r.kill()
		env.logf("crash-outbox: producer kill %d of %d, %d committed so far", i+1, o.Kills, countKind(path, "committed"))
	}
	relayKills := 0
	for i := 0; i < o.Kills; i++ {
		pending, err := store.Pending(ctx, 1)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			break
		}
		from := countKind(path, "relayed")
		r, err := startChild(o, args("outbox-relay")...)
		if err != nil {
			return err
		}
		if err := waitProgress(ctx, r, path, "relayed", from); err != nil {
			r.kill()
			return fmt.Errorf("relay life %d: %v", i+1, err)
		}
		_ = sleepCtx(ctx, time.Duration(rand.Int64N(int64(o.MaxLife/4)+1)))
		r.kill()
		relayKills++
		env.logf("crash-outbox: relay kill %d of %d", relayKills, o.Kills)
	}
	// A last relay, in this process, finishes the outbox once the killed
	// relays' claims have expired.
	relay, err := outbox.NewRelay(c, store, outbox.WithLockTTL(outboxLockTTL), outbox.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		relay.SweepOnce(ctx)
		pending, err := store.Pending(ctx, 1)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the outbox still held records 60s after the last kill")
		}
		_ = sleepCtx(ctx, 100*time.Millisecond) // a killed relay's claim expires on the clock
	}
	rec, err := readRecord(path)
	if err != nil {
		return err
	}
	got, err := drainIDs(ctx, c, q)
	if err != nil {
		return err
	}
	committed := rec["committed"]
	missing, dups, uncommitted := 0, 0, 0
	for id := range committed {
		if got[id] == 0 {
			missing++
		}
	}
	for id, n := range got {
		if n > 1 {
			dups += n - 1
		}
		if committed[id] == 0 {
			uncommitted++
		}
	}
	res.Set("producer-kills", o.Kills)
	res.Set("relay-kills", relayKills)
	res.Set("committed", len(committed))
	res.Set("on-queue", len(got))
	res.Set("committed-missing", missing)
	res.Set("published-twice", dups)
	res.Set("committed-unrecorded", uncommitted)
	if missing > 0 {
		res.Failf("%d committed records were never published", missing)
	}
	if len(committed) == 0 {
		res.Failf("nothing was committed")
	}
	if relayKills == 0 {
		res.Failf("the relay was never killed: the backlog was gone before the first kill")
	}
	return nil
}
