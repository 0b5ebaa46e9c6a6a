package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/acemq-go/acemq/saga"
	"github.com/acemq-go/acemq/sqlstore"
)

// An order saga whose payment fails: the stock reserved is released,
// the notification has nothing to undo.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:example?mode=memory&cache=shared")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database, one connection

	step := func(what string, fail bool) saga.Func {
		return func(ctx context.Context, c saga.Call) error {
			fmt.Printf("%s %s\n", what, c.Subject)
			if fail {
				return errors.New("card declined")
			}
			return nil
		}
	}
	order, err := saga.Define("order",
		saga.Step{Name: "reserve", Action: step("reserve", false), Compensate: step("release", false)},
		saga.Step{Name: "notify", Action: step("notify", false)},
		saga.Step{Name: "charge", Action: step("charge", true), Compensate: step("refund", false)},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	runner, err := saga.NewRunner(db, sqlstore.SQLite)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := runner.EnsureSchema(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := runner.Run(ctx, order, []byte("order-7"), "text/plain")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, "failed at", res.FailedStep+":", res.Failure)
	// Output:
	// reserve order-7
	// notify order-7
	// charge order-7
	// release order-7
	// compensated failed at charge: card declined
}
