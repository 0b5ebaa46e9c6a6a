package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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

// A runner that sweeps in the background finishes an instance another
// runner left behind (here: its caller went away in the middle of the
// charge, so the run was abandoned and its lease released; a crashed
// process leaves one the same way, taken once its lease expired).
func ExampleWithSweepEvery() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:sweepexample?mode=memory&cache=shared")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	var stop context.CancelFunc
	order, _ := saga.Define("order",
		saga.Step{Name: "charge", Action: func(ctx context.Context, c saga.Call) error {
			fmt.Println("charge, attempt", c.Attempt) // record c.IdempotencyKey with the charge
			if c.Attempt == 1 {
				stop() // the caller goes away before the step is recorded done
				return ctx.Err()
			}
			return nil
		}},
		saga.Step{Name: "ship", Action: func(ctx context.Context, c saga.Call) error { fmt.Println("ship"); return nil }},
	)
	first, _ := saga.NewRunner(db, sqlstore.SQLite, saga.WithLease(time.Second))
	if err := first.EnsureSchema(ctx); err != nil {
		fmt.Println(err)
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	stop = cancel
	if _, err := first.Run(rctx, order, []byte("order-7"), "text/plain"); err != nil {
		fmt.Println("the first run stopped")
	}

	resumed := make(chan saga.Result, 1)
	second, err := saga.NewRunner(db, sqlstore.SQLite, saga.WithSweepEvery(50*time.Millisecond),
		saga.WithSweepObserver(func(results []saga.Result, err error) {
			for _, r := range results {
				resumed <- r
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Close(ctx)
	if err := second.Register(order); err != nil {
		fmt.Println(err)
		return
	}
	select {
	case r := <-resumed:
		fmt.Println("resumed:", r.Outcome)
	case <-time.After(10 * time.Second):
		fmt.Println("not resumed")
	}
	// Output:
	// charge, attempt 1
	// the first run stopped
	// charge, attempt 2
	// ship
	// resumed: completed
}
