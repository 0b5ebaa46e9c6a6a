package saga

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// leaveRunning runs one instance of def on a runner that "crashes" in
// step b: b's first call hands the instance to a dead owner whose lease
// has expired, as a killed process leaves it, so the runner's next write
// finds its lease lost. It returns the instance id.
func leaveRunning(t *testing.T, db *sql.DB, d sqlstore.Dialect, def *Definition) string {
	t.Helper()
	r, err := NewRunner(db, d, WithOwner("crashed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), def, nil, ""); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the crashing run: %v", err)
	}
	list, err := r.List(context.Background(), StatusRunning)
	if err != nil || len(list) != 1 {
		t.Fatalf("instances left running: %+v %v", list, err)
	}
	return list[0].ID
}

// crashOnFirstB is a step b that, on its first call, gives the instance
// to a dead runner with an expired lease; calls counts its calls.
func crashOnFirstB(db *sql.DB, d sqlstore.Dialect, calls *atomic.Int32, later Func) Func {
	return func(ctx context.Context, c Call) error {
		if calls.Add(1) == 1 {
			_, err := db.ExecContext(ctx, d.Rebind(`UPDATE acemq_saga SET locked_by = 'dead:1', locked_until = 1 WHERE instance_id = ?`), c.InstanceID)
			return err
		}
		return later(ctx, c)
	}
}

func TestThePeriodicSweepResumesAnInstanceLeftRunningAndCloseStopsIt(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		var bCalls, cCalls atomic.Int32
		def, _ := Define("order",
			Step{Name: "a", Action: func(context.Context, Call) error { return nil }},
			Step{Name: "b", Action: crashOnFirstB(db, d, &bCalls, func(context.Context, Call) error { return nil })},
			Step{Name: "c", Action: func(context.Context, Call) error { cCalls.Add(1); return nil }})
		id := leaveRunning(t, db, d, def)

		got := make(chan Result, 16)
		sweeps := make(chan error, 1024)
		r, err := NewRunner(db, d, WithOwner("sweeper"), WithLease(time.Second), WithSweepEvery(20*time.Millisecond),
			WithSweepObserver(func(res []Result, err error) {
				for _, x := range res {
					got <- x
				}
				sweeps <- err
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		if err := r.Register(def); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-got:
			if res.InstanceID != id || res.Outcome != Completed {
				t.Fatalf("the sweep resumed %+v, want %s completed", res, id)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no periodic sweep resumed the instance in 20 s")
		}
		if bCalls.Load() != 2 || cCalls.Load() != 1 {
			t.Fatalf("b ran %d times (want 2: the crashed call and the resumed one), c %d (want 1)", bCalls.Load(), cCalls.Load())
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
		// The goroutine has ended (goleak checks it at the end too): no
		// observer call is under way, and none comes after Close.
		n := len(sweeps)
		for range n {
			if err := <-sweeps; err != nil {
				t.Errorf("a sweep failed: %v", err)
			}
		}
		if n == 0 {
			t.Fatal("the observer saw no sweep")
		}
	})
}

// Close's deadline abandons the instance the sweep is carrying on: the
// action's context is cancelled, the step is not recorded failed (no
// compensation because of a shutdown), the lease is released, and the
// next sweep re-runs the step.
func TestCloseAbandonsTheResumedInstanceWithoutCompensatingIt(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		var bCalls, undoA atomic.Int32
		started := make(chan struct{}, 1)
		hang := true
		def, _ := Define("order",
			Step{Name: "a", Action: func(context.Context, Call) error { return nil }, Compensate: func(context.Context, Call) error { undoA.Add(1); return nil }},
			Step{Name: "b", Action: crashOnFirstB(db, d, &bCalls, func(ctx context.Context, c Call) error {
				if !hang {
					return nil
				}
				started <- struct{}{}
				<-ctx.Done() // until Close gives up
				return ctx.Err()
			})})
		id := leaveRunning(t, db, d, def)

		sweeps := make(chan error, 1024)
		r, err := NewRunner(db, d, WithOwner("closing"), WithLease(time.Minute), WithSweepEvery(20*time.Millisecond),
			WithSweepObserver(func(_ []Result, err error) { sweeps <- err }))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Register(def); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("no periodic sweep resumed the instance in 20 s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err = r.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "acemq: ") || !strings.Contains(err.Error(), "abandoned") {
			t.Fatalf("Close past its deadline: %v", err)
		}
		var last error
		for len(sweeps) > 0 {
			last = <-sweeps
		}
		if !errors.Is(last, ErrAbandoned) {
			t.Fatalf("the abandoned sweep reported %v", last)
		}
		inst, err := r.Show(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != StatusRunning || inst.Steps[1].Status != "running" || inst.Steps[0].Status != "done" || inst.FailedStep != "" {
			t.Fatalf("the abandoned instance %+v: it must stay running at b, not failed", inst)
		}
		if inst.LockedUntil.After(time.Now()) {
			t.Fatalf("the abandoned instance is still leased until %v; Close releases it", inst.LockedUntil)
		}
		// Any runner's next sweep takes it at once and re-runs b.
		hang = false
		other, _ := NewRunner(db, d, WithOwner("next"))
		if err := other.Register(def); err != nil {
			t.Fatal(err)
		}
		res, err := other.Sweep(context.Background())
		if err != nil || len(res) != 1 || res[0].Outcome != Completed {
			t.Fatalf("the next sweep: %+v %v", res, err)
		}
		if bCalls.Load() != 3 || undoA.Load() != 0 {
			t.Fatalf("b ran %d times (want 3), a was compensated %d times (want 0)", bCalls.Load(), undoA.Load())
		}
	})
}

func TestWithSweepEveryValidates(t *testing.T) {
	db, err := sql.Open("sqlite", "file:unused?mode=memory")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := NewRunner(db, sqlstore.SQLite, WithSweepEvery(time.Millisecond)); err == nil || !strings.Contains(err.Error(), "at least 10ms") {
		t.Fatalf("a 1ms sweep interval: %v", err)
	}
	if _, err := NewRunner(db, sqlstore.SQLite, WithSweepObserver(nil)); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Fatalf("a nil observer: %v", err)
	}
	r, err := NewRunner(db, sqlstore.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close without a sweep: %v", err)
	}
}
