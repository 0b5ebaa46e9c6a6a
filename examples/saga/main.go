// Command saga shows a persisted saga (package saga) on SQLite, with
// nothing to install:
//
//	go run ./examples/saga
//	go run ./examples/saga -db postgres://user@127.0.0.1:5432/db
//
// (or set ACEMQ_DB). Three orders run through reserve → charge → ship:
// the first completes; the second's charge is declined, so its
// reservation is released; the third's process "stops" right after its
// charge took effect (its context is cancelled before the transition is
// written), and a second runner, sweeping in the background
// (saga.WithSweepEvery), takes the instance over once the lease expires, runs the charge again (the idempotency key makes that a
// no-op) and ships it. It exits 0 only if every account was charged
// exactly what it owes.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dsn := flag.String("db", os.Getenv("ACEMQ_DB"), "postgres://… (default: SQLite in a temporary file)")
	flag.Parse()
	ctx := context.Background()
	db, d, cleanup, err := open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer cleanup()
	for _, stmt := range []string{
		`CREATE TABLE example_charge (idem_key VARCHAR(255) PRIMARY KEY, account VARCHAR(64) NOT NULL, cents INTEGER NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	// charge records its idempotency key in the same transaction as the
	// charge: a second run of the same step charges nothing.
	charge := func(sign int) saga.Func {
		return func(ctx context.Context, c saga.Call) error {
			account := string(c.Subject)
			if sign > 0 && strings.HasPrefix(account, "declined") {
				return errors.New("card declined")
			}
			key := c.IdempotencyKey
			if sign < 0 {
				key = "undo:" + key
			}
			_, err := db.ExecContext(ctx, d.Rebind(`INSERT INTO example_charge (idem_key, account, cents) VALUES (?, ?, ?)`), key, account, sign*1000)
			if sqlstore.IsUniqueViolation(err) {
				fmt.Printf("  %s: %s already done (attempt %d), nothing to do\n", account, c.Step, c.Attempt)
				return nil
			}
			if err == nil {
				fmt.Printf("  %s: %s %d cents\n", account, c.Step, sign*1000)
			}
			return err
		}
	}
	say := func(what string) saga.Func {
		return func(ctx context.Context, c saga.Call) error {
			fmt.Printf("  %s: %s\n", c.Subject, what)
			return nil
		}
	}
	// stop simulates a process that dies right after the charge: the
	// context is cancelled, so the "done" transition is never written.
	var stop context.CancelFunc
	order, err := saga.Define("order",
		saga.Step{Name: "reserve", Action: say("reserved"), Compensate: say("reservation released")},
		saga.Step{Name: "charge", Action: func(ctx context.Context, c saga.Call) error {
			err := charge(1)(ctx, c)
			if string(c.Subject) == "stopping" && c.Attempt == 1 {
				stop()
			}
			return err
		}, Compensate: charge(-1)},
		saga.Step{Name: "ship", Action: say("shipped")},
	)
	if err != nil {
		return err
	}
	first, err := saga.NewRunner(db, d, saga.WithLease(time.Second), saga.WithOwner("first"))
	if err != nil {
		return err
	}
	if err := first.EnsureSchema(ctx); err != nil {
		return err
	}
	for _, account := range []string{"happy", "declined", "stopping"} {
		fmt.Printf("order for %s\n", account)
		rctx, cancel := context.WithCancel(ctx)
		stop = cancel
		res, err := first.Run(rctx, order, []byte(account), "text/plain")
		cancel()
		if err != nil {
			fmt.Printf("  run stopped: %v\n", err)
			continue
		}
		fmt.Printf("  -> %s%s\n", res.Outcome, failedAt(res))
	}

	// The second runner sweeps in the background (as a service would keep
	// one running) and reports what it resumed.
	resumed := make(chan saga.Result, 8)
	second, err := saga.NewRunner(db, d, saga.WithLease(time.Second), saga.WithOwner("second"),
		saga.WithSweepEvery(300*time.Millisecond), saga.WithSweepObserver(func(results []saga.Result, err error) {
			if err != nil {
				fmt.Printf("  sweep: %v\n", err)
			}
			for _, res := range results {
				resumed <- res
			}
		}))
	if err != nil {
		return err
	}
	defer second.Close(ctx)
	if err := second.Register(order); err != nil {
		return err
	}
	fmt.Println("second runner sweeping every 300 ms until the stopped order's lease expires")
	select {
	case res := <-resumed:
		fmt.Printf("  resumed %s -> %s%s\n", res.InstanceID, res.Outcome, failedAt(res))
	case <-time.After(10 * time.Second):
		return errors.New("example: the stopped order was not resumed within 10 s")
	}
	if err := second.Close(ctx); err != nil {
		return err
	}

	want := map[string]int{"happy": 1000, "declined": 0, "stopping": 1000}
	for account, cents := range want {
		var got sql.NullInt64
		if err := db.QueryRowContext(ctx, d.Rebind(`SELECT SUM(cents) FROM example_charge WHERE account = ?`), account).Scan(&got); err != nil {
			return err
		}
		if int(got.Int64) != cents {
			return fmt.Errorf("example: %s was charged %d cents, want %d", account, got.Int64, cents)
		}
	}
	fmt.Println("every account charged exactly what it owes")
	return nil
}

func failedAt(res saga.Result) string {
	if res.FailedStep == "" {
		return ""
	}
	return fmt.Sprintf(" (failed at %s: %s)", res.FailedStep, res.Failure)
}

func open(ctx context.Context, dsn string) (*sql.DB, sqlstore.Dialect, func(), error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, 0, nil, err
		}
		drop := func() {
			_, _ = db.ExecContext(context.Background(), `DROP TABLE IF EXISTS example_charge, acemq_saga_step, acemq_saga`)
		}
		drop() // start clean: the example creates its tables
		return db, sqlstore.PostgreSQL, func() { drop(); db.Close() }, db.PingContext(ctx)
	}
	dir, err := os.MkdirTemp("", "acemq-saga-")
	if err != nil {
		return nil, 0, nil, err
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "saga.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, 0, nil, err
	}
	return db, sqlstore.SQLite, func() { db.Close(); os.RemoveAll(dir) }, nil
}
