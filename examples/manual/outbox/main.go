// Command outbox is the program of docs/outbox.md: an order and its
// message commit in one SQLite transaction, and a relay publishes the
// message once the transaction has committed.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver; pgx or go-sql-driver/mysql work the same

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/sqlstore"
)

type OrderPlaced struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "shop")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, cents INTEGER)`); err != nil {
		log.Fatal(err)
	}

	c, err := acemq.Connect(ctx, "memory://shop", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders.placed", acemq.QueueOptions{})); err != nil {
		log.Fatal(err)
	}

	// The store is the acemq_outbox table in your database.
	store, err := outbox.NewStore(db, sqlstore.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.EnsureSchema(ctx); err != nil { // CREATE TABLE IF NOT EXISTS
		log.Fatal(err)
	}

	// The order and its message: one transaction, so both or neither.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES (?, ?)`, "o-1", 1999); err != nil {
		log.Fatal(err)
	}
	env, err := store.Add(ctx, tx, c, "", "orders.placed", OrderPlaced{ID: "o-1", Cents: 1999})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed order o-1 with message", env.ID)

	// The relay publishes what committed, in order, and deletes each record
	// once the broker has confirmed it. Run it for as long as the service runs.
	relay, err := outbox.NewRelay(c, store)
	if err != nil {
		log.Fatal(err)
	}
	go relay.Run(ctx)
	defer relay.Close(ctx)

	got := make(chan string, 1)
	cons, err := acemq.Consume(ctx, c, "orders.placed", func(ctx context.Context, m *acemq.Message[OrderPlaced]) acemq.Decision {
		got <- m.Envelope.ID
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)
	fmt.Println("consumed message", <-got)
}
