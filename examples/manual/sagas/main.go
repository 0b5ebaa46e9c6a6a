// Command sagas is the program of docs/sagas.md: an order saga whose
// steps are undone in reverse when a later one fails, its state kept in
// SQLite.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
)

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
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (key TEXT PRIMARY KEY, cents INTEGER)`); err != nil {
		log.Fatal(err)
	}

	reserve := func(ctx context.Context, c saga.Call) error {
		fmt.Printf("%s: reserve stock\n", c.Subject)
		return nil
	}
	release := func(ctx context.Context, c saga.Call) error {
		fmt.Printf("%s: release stock\n", c.Subject)
		return nil
	}
	// A TxAction runs in the transaction that records the step's end, so
	// its effect commits exactly once; the key is the same on every attempt.
	charge := func(ctx context.Context, tx *sql.Tx, c saga.Call) error {
		if string(c.Subject) == "o-2" {
			return errors.New("card declined")
		}
		fmt.Printf("%s: charge (key %s)\n", c.Subject, c.IdempotencyKey)
		_, err := tx.ExecContext(ctx, `INSERT INTO payments VALUES (?, ?)`, c.IdempotencyKey, 1999)
		return err
	}
	ship := func(ctx context.Context, c saga.Call) error {
		fmt.Printf("%s: ship\n", c.Subject)
		return nil
	}
	order, err := saga.Define("order",
		saga.Step{Name: "reserve", Action: reserve, Compensate: release},
		saga.Step{Name: "charge", TxAction: charge, Timeout: 10 * time.Second},
		saga.Step{Name: "ship", Action: ship},
	)
	if err != nil {
		log.Fatal(err)
	}

	// The runner keeps every transition in acemq_saga and acemq_saga_step.
	// In a service, saga.WithSweepEvery(time.Minute) also finishes what a
	// crashed process left running (register the definitions first).
	runner, err := saga.NewRunner(db, sqlstore.SQLite)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.EnsureSchema(ctx); err != nil {
		log.Fatal(err)
	}
	if err := runner.Register(order); err != nil {
		log.Fatal(err)
	}
	defer runner.Close(ctx)

	for _, id := range []string{"o-1", "o-2"} {
		res, err := runner.Run(ctx, order, []byte(id), "text/plain")
		if err != nil { // saga.ErrAbandoned, saga.ErrLeaseLost: a sweep finishes it
			log.Fatal(err)
		}
		switch res.Outcome {
		case saga.Completed:
			fmt.Println(id, "completed")
		case saga.Compensated:
			fmt.Printf("%s compensated: %s failed: %s\n", id, res.FailedStep, res.Failure)
		default: // saga.Unresolved: a compensation failed; a person decides (acemq saga list)
			fmt.Println(id, "unresolved:", res.Unresolved)
		}
	}
}
