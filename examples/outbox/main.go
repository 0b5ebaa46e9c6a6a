// Command outbox shows the transactional outbox: orders and their
// messages are written in one database transaction, and a relay publishes
// what committed. It runs with nothing installed (memory:// broker, SQLite
// file) or against RabbitMQ and PostgreSQL:
//
//	go run ./examples/outbox
//	go run ./examples/outbox -url amqp://guest:guest@127.0.0.1:5672/ -db postgres://user@127.0.0.1:5432/db
//
// (or set ACEMQ_URL / ACEMQ_DB). It exits 0 only if every committed order
// was published exactly once and the rolled-back one was not.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/outbox/pgnotify"
	"github.com/acemq-go/acemq/sqlstore"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func openDB(dsn string) (*sql.DB, sqlstore.Dialect, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		db, err := sql.Open("pgx", dsn)
		return db, sqlstore.PostgreSQL, err
	}
	if dsn == "" {
		dir, err := os.MkdirTemp("", "acemq-outbox-example")
		if err != nil {
			return nil, 0, err
		}
		dsn = filepath.Join(dir, "outbox.db")
	}
	db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	return db, sqlstore.SQLite, err
}

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://outbox-example"), "broker URL")
	dsn := flag.String("db", env("ACEMQ_DB", ""), "postgres:// URL or SQLite file (default: a temporary SQLite file)")
	flag.Parse()
	if err := run(*url, *dsn); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url, dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	const queue = "example.outbox.orders"
	if err := conn.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	if _, err := conn.PurgeQueue(ctx, queue); err != nil {
		return err
	}
	db, dialect, err := openDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := outbox.NewStore(db, dialect)
	if err != nil {
		return err
	}
	if err := store.EnsureSchema(ctx); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_orders (id VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		return err
	}
	fmt.Printf("broker %s, database %s\n", conn.Health(ctx).Transport, dialect)

	// Each order and its message commit together; the third rolls back.
	place := func(o order, commit bool) (string, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		defer tx.Rollback() //nolint:errcheck
		if _, err := tx.ExecContext(ctx, dialect.Rebind(`INSERT INTO example_orders (id, amount) VALUES (?, ?)`), o.ID, o.Amount); err != nil {
			return "", err
		}
		e, err := store.Add(ctx, tx, conn, "", queue, o)
		if err != nil {
			return "", err
		}
		if !commit {
			return e.ID, tx.Rollback()
		}
		return e.ID, tx.Commit()
	}
	run := fmt.Sprint(time.Now().UnixNano())
	want := map[string]bool{}
	var rolledBack string
	for i := 1; i <= 5; i++ {
		o := order{ID: fmt.Sprintf("order-%s-%d", run, i), Amount: i * 10}
		commit := i != 3
		id, err := place(o, commit)
		if err != nil {
			return err
		}
		if commit {
			want[id] = true
			fmt.Printf("  committed %s with its message %s\n", o.ID, id)
		} else {
			rolledBack = id
			fmt.Printf("  rolled back %s: its message %s must never be published\n", o.ID, id)
		}
	}

	opts := []outbox.RelayOption{outbox.WithLogger(slog.New(slog.DiscardHandler))}
	if dialect == sqlstore.PostgreSQL {
		// Wake on Add's NOTIFY instead of waiting for the next poll.
		opts = append(opts, outbox.WithNotifier(pgnotify.New(db)))
	}
	relay, err := outbox.NewRelay(conn, store, opts...)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	defer func() { relay.Close(context.Background()); <-done }()

	puller, err := conn.NewPuller(ctx)
	if err != nil {
		return err
	}
	defer puller.Close()
	got := map[string]int{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(got) < len(want) {
		m, ok, err := puller.Pull(ctx, queue)
		if err != nil {
			return err
		}
		if !ok {
			select {
			case <-ctx.Done():
				return fmt.Errorf("only %d of %d messages arrived", len(got), len(want))
			case <-tick.C:
			}
			continue
		}
		_ = m.Ack()
		got[m.Envelope.ID]++
		fmt.Printf("  relay published %s (type %s, %s)\n", m.Envelope.ID, m.Envelope.Type, m.Body)
	}
	for id, n := range got {
		if !want[id] || n != 1 {
			return fmt.Errorf("message %s arrived %d times (expected once, and only for committed orders)", id, n)
		}
	}
	if got[rolledBack] != 0 {
		return fmt.Errorf("the rolled-back order's message was published")
	}
	fmt.Printf("OK: %d committed orders published once each; the rolled-back one never left the database\n", len(want))
	return nil
}
