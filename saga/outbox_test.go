package saga

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/sqlstore"
)

// A TxAction publishes through the outbox in the transaction that records
// its step done: a successful step leaves exactly one outbox record, and a
// step that fails after its Add leaves none (rolled back with the
// transition). The same for a TxCompensate.
func TestTxActionPublishesThroughTheOutboxWithTheTransition(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		conn, err := acemq.Connect(ctx, "memory://saga-outbox-"+d.String(), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		store, err := outbox.NewStore(db, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.EnsureSchema(ctx); err != nil {
			t.Fatal(err)
		}
		publish := func(key string, fail bool) TxFunc {
			return func(ctx context.Context, tx *sql.Tx, c Call) error {
				if _, err := store.Add(ctx, tx, conn, "", key, map[string]string{"instance": c.InstanceID}); err != nil {
					return err
				}
				if fail {
					return errors.New("refused after publishing")
				}
				return nil
			}
		}
		def, err := Define("order",
			Step{Name: "placed", TxAction: publish("order.placed", false), TxCompensate: publish("order.cancelled", false)},
			Step{Name: "charge", TxAction: publish("order.charged", true)})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := NewRunner(db, d)
		res, err := r.Run(ctx, def, nil, "")
		if err != nil || res.Outcome != Compensated || res.FailedStep != "charge" {
			t.Fatalf("run %+v %v", res, err)
		}
		keys, err := sqlstore.Column(ctx, db, `SELECT routing_key FROM acemq_outbox ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0] != "order.placed" || keys[1] != "order.cancelled" {
			t.Fatalf("outbox records %v, want order.placed then order.cancelled (order.charged rolled back)", keys)
		}
		if _, err := Define("x", Step{Name: "a", Action: func(context.Context, Call) error { return nil }, TxAction: publish("k", false)}); err == nil {
			t.Fatal("a step with both Action and TxAction was accepted")
		}
	})
}
