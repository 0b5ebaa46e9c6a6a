package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// waitFor fails the test when ch yields nothing within a generous bound
// (a guard against a hang, never a pace).
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

// The order (reserve; A's charge still running when B takes the
// instance over; B's charge fails; B undoes the reservation; A's charge
// takes effect) cannot happen: runner A, paused so that no renewal goes
// through, has its step's context cancelled at three quarters of the
// lease, before B can take the instance; B takes it once the lease
// expired, and the charge that may have taken effect is compensated, its
// compensation told so.
func TestAPausedRunnerStopsBeforeItsLeaseCanBeTakenAndTheStepIsCompensated(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		const lease = time.Minute
		ctx := context.Background()
		clock := newFakeClock()
		j := &journal{}
		started, cancelled := make(chan struct{}), make(chan struct{})
		def, err := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "undo reserve")},
			Step{Name: "charge", Action: func(ctx context.Context, c Call) error {
				if c.Attempt == 1 { // runner A
					j.add("charge 1 started", c)
					close(started)
					<-ctx.Done()
					j.add("charge 1 cancelled", c)
					close(cancelled)
					return ctx.Err()
				}
				j.add(fmt.Sprintf("charge %d fails", c.Attempt), c)
				return errors.New("card declined")
			}, Compensate: func(ctx context.Context, c Call) error {
				j.add(fmt.Sprintf("refund (uncertain %v)", c.Uncertain), c)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := NewRunner(db, d, WithClock(clock), WithLease(lease), WithOwner("A"))
		b, _ := NewRunner(db, d, WithClock(clock), WithLease(lease), WithOwner("B"))
		if err := b.Register(def); err != nil {
			t.Fatal(err)
		}
		unpause := make(chan struct{})
		a.beforeRenew = func() { <-unpause } // A is paused: no renewal of its goes through
		ran := make(chan error, 1)
		go func() { _, err := a.Run(ctx, def, nil, ""); ran <- err }()
		waitFor(t, started, "A's charge")

		clock.Advance(lease * 3 / 4)
		waitFor(t, cancelled, "the cancellation of A's charge at three quarters of its lease")
		if got, err := b.Sweep(ctx); err != nil || len(got) != 0 {
			t.Fatalf("B took the instance while A's lease held: %+v %v", got, err)
		}
		close(unpause)
		if err := waitFor(t, ran, "A's Run returning"); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "three quarters") {
			t.Fatalf("A's run: %v, want ErrLeaseLost at the margin", err)
		}

		clock.Advance(lease/4 + time.Millisecond) // A's lease expired
		got, err := b.Sweep(ctx)
		if err != nil || len(got) != 1 || got[0].Outcome != Compensated || got[0].FailedStep != "charge" {
			t.Fatalf("B's sweep: %+v %v", got, err)
		}
		want := []string{"reserve", "charge 1 started", "charge 1 cancelled", "charge 2 fails", "refund (uncertain true)", "undo reserve"}
		if calls := j.list(); !slices.Equal(calls, want) {
			t.Fatalf("calls %q, want %q", calls, want)
		}
		inst, err := b.Show(ctx, got[0].InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != "compensated" || inst.Steps[0].Status != "compensated" || inst.Steps[1].Status != "compensated" {
			t.Fatalf("instance %+v", inst)
		}
	})
}

// A runner on a host whose clock runs two leases ahead takes nothing that
// another runner holds: leases are written and compared on the database's
// clock.
func TestARunnerWhoseClockIsAheadTakesNothingEarly(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		b, _ := NewRunner(db, d, WithLease(time.Minute), WithOwner("B"))
		b.clock = skewedClock{by: 2 * time.Minute}
		var taken []Result
		def, _ := Define("order", Step{Name: "charge", Action: func(ctx context.Context, c Call) error {
			res, err := b.Sweep(ctx)
			taken = append(taken, res...)
			return err
		}})
		if err := b.Register(def); err != nil {
			t.Fatal(err)
		}
		a, _ := NewRunner(db, d, WithLease(time.Minute), WithOwner("A"))
		res, err := a.Run(ctx, def, nil, "")
		if err != nil || res.Outcome != Completed {
			t.Fatalf("A's run %+v %v", res, err)
		}
		if len(taken) != 0 {
			t.Fatalf("B, its clock ahead, took A's instance: %+v", taken)
		}
	})
}

// A process that dies after its step took effect leaves the step running;
// when the step's re-run fails, the first run's effect is compensated
// (told it may not be there), not left in place.
func TestAStepThatMayHaveTakenEffectIsCompensatedWhenItsReRunFails(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		j := &journal{}
		var calls atomic.Int32
		def, _ := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "undo reserve")},
			Step{Name: "b", Action: crashOnFirstB(db, d, &calls, func(ctx context.Context, c Call) error {
				j.add("charge 2 fails", c)
				return errors.New("card declined")
			}), Compensate: func(ctx context.Context, c Call) error {
				j.add(fmt.Sprintf("refund attempt %d (uncertain %v)", c.Attempt, c.Uncertain), c)
				return nil
			}},
			Step{Name: "ship", Action: ok(j, "ship")})
		leaveRunning(t, db, d, def)
		r, _ := NewRunner(db, d, WithOwner("sweeper"))
		if err := r.Register(def); err != nil {
			t.Fatal(err)
		}
		got, err := r.Sweep(context.Background())
		if err != nil || len(got) != 1 || got[0].Outcome != Compensated || got[0].FailedStep != "b" {
			t.Fatalf("sweep %+v %v", got, err)
		}
		want := []string{"reserve", "charge 2 fails", "refund attempt 3 (uncertain true)", "undo reserve"}
		if calls := j.list(); !slices.Equal(calls, want) {
			t.Fatalf("calls %q, want %q", calls, want)
		}
	})
}

// A caller that goes away (its context cancelled in the middle of a step)
// neither fails nor compensates the saga: the run is abandoned, its lease
// released, and the next sweep re-runs the interrupted step and carries
// on.
func TestACancelledCallerLeavesTheInstanceToTheSweepAndCompensatesNothing(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx, cancel := context.WithCancel(context.Background())
		j := &journal{}
		def, _ := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "undo reserve")},
			Step{Name: "charge", Action: func(ctx context.Context, c Call) error {
				j.add(fmt.Sprintf("charge %d", c.Attempt), c)
				if c.Attempt == 1 {
					cancel() // the HTTP client went away
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}, Compensate: ok(j, "refund")},
			Step{Name: "ship", Action: ok(j, "ship")})
		r, _ := NewRunner(db, d)
		_, err := r.Run(ctx, def, nil, "")
		if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.Canceled) {
			t.Fatalf("run with a cancelled caller: %v, want ErrAbandoned wrapping context.Canceled", err)
		}
		if calls := j.list(); !slices.Equal(calls, []string{"reserve", "charge 1"}) {
			t.Fatalf("calls %q: a cancelled caller must compensate nothing", calls)
		}
		list, err := r.List(context.Background(), StatusRunning)
		if err != nil || len(list) != 1 {
			t.Fatalf("running instances %+v %v", list, err)
		}
		inst, err := r.Show(context.Background(), list[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if !inst.LockedUntil.IsZero() || inst.Steps[0].Status != "done" || inst.Steps[1].Status != "running" || inst.Steps[2].Status != "pending" {
			t.Fatalf("the abandoned instance: %+v, want released, reserve done and charge running", inst)
		}
		got, err := r.Sweep(context.Background())
		if err != nil || len(got) != 1 || got[0].Outcome != Completed {
			t.Fatalf("sweep %+v %v", got, err)
		}
		if calls := j.list(); !slices.Equal(calls, []string{"reserve", "charge 1", "charge 2", "ship"}) {
			t.Fatalf("calls %q", calls)
		}
	})
}

// A step that never returns on its own is cancelled at its timeout; that
// counts as its failure, and the step itself is compensated too (it may
// have taken effect), before the steps done.
func TestAHungStepTimesOutAndIsCompensatedAsUncertain(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		clock := newFakeClock()
		j := &journal{}
		started := make(chan struct{})
		def, err := Define("order",
			Step{Name: "reserve", Action: ok(j, "reserve"), Compensate: ok(j, "undo reserve")},
			Step{Name: "charge", Timeout: 10 * time.Second, Action: func(ctx context.Context, c Call) error {
				j.add("charge", c)
				close(started)
				<-ctx.Done() // hung until its context ends
				return ctx.Err()
			}, Compensate: func(ctx context.Context, c Call) error {
				j.add(fmt.Sprintf("refund (uncertain %v)", c.Uncertain), c)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := NewRunner(db, d, WithClock(clock))
		type ran struct {
			res Result
			err error
		}
		done := make(chan ran, 1)
		go func() { res, err := r.Run(context.Background(), def, nil, ""); done <- ran{res, err} }()
		waitFor(t, started, "the charge")
		clock.Advance(10 * time.Second)
		out := waitFor(t, done, "the run's end")
		if out.err != nil || out.res.Outcome != Compensated || out.res.FailedStep != "charge" || !strings.Contains(out.res.Failure, "did not return within its timeout of 10s") {
			t.Fatalf("run %+v %v", out.res, out.err)
		}
		if calls := j.list(); !slices.Equal(calls, []string{"reserve", "charge", "refund (uncertain true)", "undo reserve"}) {
			t.Fatalf("calls %q", calls)
		}
	})
}

// The lease is renewed every quarter of it while a step runs: for two
// leases, another runner's sweep finds nothing to take, and locked_until
// moves on with each renewal.
func TestTheLeaseIsRenewedWhileAStepRuns(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		ctx := context.Background()
		const lease = time.Minute
		clock := newFakeClock()
		other, _ := NewRunner(db, d, WithClock(clock), WithLease(lease), WithOwner("other"))
		quiet := func(context.Context, Call) error { return nil }
		otherDef, _ := Define("slow", Step{Name: "wait", Action: quiet})
		if err := other.Register(otherDef); err != nil {
			t.Fatal(err)
		}
		renewed := make(chan struct{}, 16)
		r, _ := NewRunner(db, d, WithClock(clock), WithLease(lease), WithOwner("mine"), WithStepTimeout(time.Hour))
		r.afterRenew = func() { renewed <- struct{}{} }
		var stolen []Result
		var untils []time.Time
		def, _ := Define("slow", Step{Name: "wait", Action: func(ctx context.Context, c Call) error {
			for range 8 { // two leases
				clock.Advance(lease / 4)
				waitFor(t, renewed, "a renewal")
				res, err := other.Sweep(ctx)
				if err != nil {
					return err
				}
				stolen = append(stolen, res...)
				in, err := other.Show(ctx, c.InstanceID)
				if err != nil {
					return err
				}
				untils = append(untils, in.LockedUntil)
			}
			return nil
		}})
		res, err := r.Run(ctx, def, nil, "")
		if err != nil || res.Outcome != Completed {
			t.Fatalf("run %+v %v", res, err)
		}
		if len(stolen) != 0 {
			t.Fatalf("another runner took the instance over while it ran: %+v", stolen)
		}
		for i := 1; i < len(untils); i++ {
			if !untils[i].After(untils[i-1]) {
				t.Fatalf("locked_until did not move with renewal %d: %v", i+1, untils)
			}
		}
	})
}
