// Command idempotency shows the idempotent consumer: a payment sent twice
// with the same message id (as after a lost publisher confirm) charges the
// account once, because the handler records the id in the same database
// transaction as the charge (idempotency.Transactional). A second consumer
// shows the lease-based guard (idempotency.Guard) on an in-memory side
// effect. It runs with nothing installed (memory:// broker, SQLite file)
// or against RabbitMQ and PostgreSQL:
//
//	go run ./examples/idempotency
//	go run ./examples/idempotency -url amqp://guest:guest@127.0.0.1:5672/ -db postgres://user@127.0.0.1:5432/db
//
// (or set ACEMQ_URL / ACEMQ_DB). It exits 0 only if the balance is 150
// (without the check it would be 200) and the guarded effect ran once per id.
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
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency"
	"github.com/acemq-go/acemq/sqlstore"
)

type payment struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
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
		dir, err := os.MkdirTemp("", "acemq-idempotency-example")
		if err != nil {
			return nil, 0, err
		}
		dsn = filepath.Join(dir, "idempotency.db")
	}
	db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	return db, sqlstore.SQLite, err
}

func main() {
	url := flag.String("url", env("ACEMQ_URL", "memory://idempotency-example"), "broker URL")
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
	const payments, emails = "example.idempotency.payments", "example.idempotency.emails"
	if err := conn.Apply(ctx, acemq.NewTopology().Queue(payments, acemq.QueueOptions{Type: acemq.Classic}).Queue(emails, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	for _, q := range []string{payments, emails} {
		if _, err := conn.PurgeQueue(ctx, q); err != nil {
			return err
		}
	}
	db, dialect, err := openDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := idempotency.EnsureSchema(ctx, db, dialect); err != nil {
		return err
	}
	account := fmt.Sprintf("acct-%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_balance (account VARCHAR(64) PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, dialect.Rebind(`INSERT INTO example_balance (account, amount) VALUES (?, 0)`), account); err != nil {
		return err
	}
	fmt.Printf("broker %s, database %s\n", conn.Health(ctx).Transport, dialect)

	// 1. The stronger form: key and charge in one transaction.
	handled := make(chan string, 16)
	charge := idempotency.Transactional(db, dialect, func(ctx context.Context, tx *sql.Tx, m *acemq.Message[payment]) acemq.Decision {
		if _, err := tx.ExecContext(ctx, dialect.Rebind(`UPDATE example_balance SET amount = amount + ? WHERE account = ?`), m.Payload.Amount, m.Payload.Account); err != nil {
			return acemq.Retry(err)
		}
		fmt.Printf("  charged %d for message %s\n", m.Payload.Amount, m.Envelope.ID)
		return acemq.Accept()
	})
	c1, err := acemq.Consume(ctx, conn, payments, func(ctx context.Context, m *acemq.Message[payment]) acemq.Decision {
		d := charge(ctx, m)
		handled <- m.Envelope.ID
		return d
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	defer c1.Close(context.Background())

	p1, p2 := acemq.NewEnvelope(), acemq.NewEnvelope()
	sends := []struct {
		env acemq.Envelope
		pay payment
		say string
	}{
		{p1, payment{account, 50}, "P-1 (50)"},
		{p1, payment{account, 50}, "P-1 again, same id, as after a lost confirm"},
		{p2, payment{account, 100}, "P-2 (100)"},
	}
	for _, s := range sends {
		if _, err := conn.Publish(ctx, "", payments, s.pay, acemq.SendOptions{Envelope: new(s.env)}); err != nil {
			return err
		}
		fmt.Printf("  sent %s as %s\n", s.say, s.env.ID)
	}
	for i := 0; i < len(sends); i++ {
		select {
		case <-handled:
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d deliveries were handled", i, len(sends))
		}
	}
	var balance int
	if err := db.QueryRowContext(ctx, dialect.Rebind(`SELECT amount FROM example_balance WHERE account = ?`), account).Scan(&balance); err != nil {
		return err
	}
	fmt.Printf("  balance of %s: %d (without the check it would be 200)\n", account, balance)
	if balance != 150 {
		return fmt.Errorf("balance %d, want 150", balance)
	}

	// 2. The lease guard, for effects outside the database.
	store := idempotency.NewMemoryStore()
	var mu sync.Mutex
	sent := map[string]int{}
	done := make(chan struct{}, 16)
	guarded := idempotency.Guard(store, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		mu.Lock()
		sent[m.Envelope.ID]++
		mu.Unlock()
		fmt.Printf("  sent the e-mail for message %s\n", m.Envelope.ID)
		return acemq.Accept()
	})
	c2, err := acemq.Consume(ctx, conn, emails, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
		d := guarded(ctx, m)
		done <- struct{}{}
		return d
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	defer c2.Close(context.Background())
	e := acemq.NewEnvelope()
	for range 3 {
		if _, err := conn.Publish(ctx, "", emails, "welcome", acemq.SendOptions{Envelope: &e}); err != nil {
			return err
		}
	}
	for i := 0; i < 3; i++ {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("only %d of 3 e-mail deliveries were handled", i)
		}
	}
	mu.Lock()
	n := sent[e.ID]
	mu.Unlock()
	fmt.Printf("  3 deliveries of %s, e-mail sent %d time(s)\n", e.ID, n)
	if n != 1 {
		return fmt.Errorf("the guarded effect ran %d times, want 1", n)
	}
	fmt.Println("OK: every effect happened once per message id")
	return nil
}
