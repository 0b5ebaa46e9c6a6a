package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/sqlstore"
)

// An order and its message commit in one transaction; the relay publishes
// what committed and deletes each record after its confirm. SQLite and the
// in-process broker: nothing to install.
func ExampleRelay() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "acemq-outbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	c, err := acemq.Connect(ctx, "memory://example-outbox", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		panic(err)
	}
	store, err := outbox.NewStore(db, sqlstore.SQLite)
	if err != nil {
		panic(err)
	}
	if err := store.EnsureSchema(ctx); err != nil {
		panic(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	// ... the order's own rows are written in tx here ...
	if _, err := store.Add(ctx, tx, c, "", "orders", map[string]string{"id": "o-1"}); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	relay, err := outbox.NewRelay(c, store, outbox.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	defer relay.Close(ctx)
	sweep := relay.SweepOnce(ctx)
	info, err := c.QueueInfo(ctx, "orders")
	if err != nil {
		panic(err)
	}
	fmt.Println("published:", sweep.Published, "on the queue:", info.Messages)
	// Output: published: 1 on the queue: 1
}
