package pgnotify_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/outbox/pgnotify"
	"github.com/acemq-go/acemq/sqlstore"
)

// A relay on PostgreSQL that publishes as soon as a transaction that
// called Store.Add commits, instead of at its next poll.
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://localhost/shop")
	if err != nil {
		log.Fatal(err)
	}
	conn, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/", acemq.Config{})
	if err != nil {
		log.Fatal(err)
	}
	store, err := outbox.NewStore(db, sqlstore.PostgreSQL)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(conn, store, outbox.WithNotifier(pgnotify.New(db)))
	if err != nil {
		log.Fatal(err)
	}
	go relay.Run(ctx) //nolint:errcheck // stopped with relay.Close
}
