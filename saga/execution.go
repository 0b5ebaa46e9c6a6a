package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

type stepState struct {
	status   string
	attempts int
}

// execution is one runner's ownership of one instance, from its claim to
// its end; its writes are fenced by token (acemq_saga.locked_by).
type execution struct {
	r                   *Runner
	def                 *Definition
	id, token           string
	subject             []byte
	contentType         string
	steps               []stepState
	failedStep, failure string
	// abandon, when not nil, ends when the runner's Close gives up
	// waiting: the call under way is cancelled and not recorded.
	abandon context.Context
}

// abandoned reports whether the runner's Close gave up on this execution.
func (x *execution) abandoned() bool { return x.abandon != nil && x.abandon.Err() != nil }

// release ends the lease of an abandoned instance at once (best effort:
// otherwise it expires), so the next sweep takes it.
func (x *execution) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = x.r.db.ExecContext(ctx, x.r.q(`UPDATE acemq_saga SET locked_until = 0, version = version + 1 WHERE instance_id = ? AND locked_by = ?`), x.id, x.token)
}

// run carries the instance on from status to its end, renewing the lease
// meanwhile.
func (x *execution) run(ctx context.Context, status string) (res Result, err error) {
	stop := x.renew()
	defer func() {
		stop()
		if err != nil && x.abandoned() {
			x.release()
			res, err = Result{}, fmt.Errorf("%w (instance %s)", errAbandoned, x.id)
		}
	}()
	if status == StatusRunning {
		return x.forward(ctx)
	}
	return x.compensate(context.WithoutCancel(ctx))
}

// renew extends the lease every third of it until the returned stop is
// called (which waits for the goroutine). A renewal that finds the lease
// taken over stops renewing; the next transition reports ErrLeaseLost.
func (x *execution) renew() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(x.r.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), x.r.lease/3)
			res, err := x.r.db.ExecContext(ctx, x.r.q(`UPDATE acemq_saga SET locked_until = ?, version = version + 1 WHERE instance_id = ? AND locked_by = ?`),
				x.r.now().Add(x.r.lease).UnixMilli(), x.id, x.token)
			cancel()
			if err == nil {
				if n, err := sqlstore.RowsAffected(res); err == nil && n == 0 {
					return // taken over
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (x *execution) call(i int, attempt int) Call {
	return Call{InstanceID: x.id, Saga: x.def.name, Step: x.def.steps[i].Name, Subject: x.subject, ContentType: x.contentType,
		IdempotencyKey: x.id + "/" + x.def.steps[i].Name, Attempt: attempt}
}

// invoke runs f, turning a panic into an error.
func invoke(ctx context.Context, f Func, c Call) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("acemq: step %q of saga %q panicked: %v", c.Step, c.Saga, p)
		}
	}()
	return f(ctx, c)
}

// invokeTx runs f on tx, turning a panic into an error.
func invokeTx(ctx context.Context, f TxFunc, tx *sql.Tx, c Call) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("acemq: step %q of saga %q panicked: %v", c.Step, c.Saga, p)
		}
	}()
	return f(ctx, tx, c)
}

// stepError is a failed action or compensation, as opposed to a failed
// write of the transition.
type stepError struct{ err error }

func (e *stepError) Error() string { return e.err.Error() }

// attempt runs step i's action (or compensation) f / tf and, when it
// succeeds, records doneSet on the step: in one transaction with tf, after
// f otherwise. A *stepError is the action's failure; any other error a
// failed write.
func (x *execution) attempt(ctx context.Context, i int, f Func, tf TxFunc, c Call, doneSet string) error {
	if tf == nil {
		if err := invoke(ctx, f, c); err != nil {
			return &stepError{err}
		}
		return x.transition(ctx, false, "", nil, i, doneSet, []any{x.r.now().UnixMilli()})
	}
	return x.transitionWith(ctx, false, "", nil, i, doneSet, []any{x.r.now().UnixMilli()}, func(tx *sql.Tx) error {
		if err := invokeTx(ctx, tf, tx, c); err != nil {
			return &stepError{err}
		}
		return nil
	})
}

func (x *execution) forward(ctx context.Context) (Result, error) {
	for i := range x.def.steps {
		if x.steps[i].status == "done" {
			continue
		}
		attempt := x.steps[i].attempts + 1
		now := x.r.now().UnixMilli()
		if err := x.transition(ctx, false, "", nil, i, "status = 'running', attempts = ?, started_at = ?, finished_at = NULL", []any{attempt, now}); err != nil {
			return Result{}, err
		}
		x.steps[i] = stepState{status: "running", attempts: attempt}
		st := x.def.steps[i]
		err := x.attempt(ctx, i, st.Action, st.TxAction, x.call(i, attempt), "status = 'done', finished_at = ?")
		var failed *stepError
		if err != nil && !errors.As(err, &failed) {
			return Result{}, err
		}
		if failed != nil && x.abandoned() {
			return Result{}, errAbandoned // not a failure of the step: run() releases the lease
		}
		if failed != nil {
			cctx := context.WithoutCancel(ctx)
			x.failedStep, x.failure = st.Name, failed.Error()
			if err := x.transition(cctx, false, "status = 'compensating', failed_step = ?, failure = ?", []any{x.failedStep, x.failure},
				i, "status = 'failed', last_error = ?, finished_at = ?", []any{x.failure, x.r.now().UnixMilli()}); err != nil {
				return Result{}, err
			}
			x.steps[i].status = "failed"
			return x.compensate(cctx)
		}
		x.steps[i].status = "done"
	}
	if err := x.transition(ctx, true, "status = 'completed'", nil, -1, "", nil); err != nil {
		return Result{}, err
	}
	res := Result{InstanceID: x.id, Saga: x.def.name, Outcome: Completed}
	x.r.count(res)
	return res, nil
}

// compensate undoes, in reverse, the steps done (and re-runs one left
// compensating); ctx is already detached from the caller's cancellation.
func (x *execution) compensate(ctx context.Context) (Result, error) {
	if x.abandon != nil { // only the runner's Close may interrupt a compensation
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(x.abandon, cancel)()
	}
	for i := len(x.steps) - 1; i >= 0; i-- {
		st := x.steps[i]
		if st.status != "done" && st.status != "compensating" {
			continue
		}
		def := x.def.steps[i]
		now := x.r.now().UnixMilli()
		if def.Compensate == nil && def.TxCompensate == nil {
			if err := x.transition(ctx, false, "", nil, i, "status = 'no_compensation', finished_at = ?", []any{now}); err != nil {
				return Result{}, err
			}
			x.steps[i].status = "no_compensation"
			continue
		}
		attempt := st.attempts + 1
		if err := x.transition(ctx, false, "", nil, i, "status = 'compensating', attempts = ?, started_at = ?, finished_at = NULL", []any{attempt, now}); err != nil {
			return Result{}, err
		}
		x.steps[i] = stepState{status: "compensating", attempts: attempt}
		err := x.attempt(ctx, i, def.Compensate, def.TxCompensate, x.call(i, attempt), "status = 'compensated', finished_at = ?")
		var failed *stepError
		if err != nil && !errors.As(err, &failed) {
			return Result{}, err
		}
		if failed != nil && x.abandoned() {
			return Result{}, errAbandoned
		}
		if failed != nil {
			if err := x.transition(ctx, false, "", nil, i, "status = 'compensation_failed', last_error = ?, finished_at = ?", []any{failed.Error(), x.r.now().UnixMilli()}); err != nil {
				return Result{}, err
			}
			x.steps[i].status = "compensation_failed"
			continue
		}
		x.steps[i].status = "compensated"
	}
	res := Result{InstanceID: x.id, Saga: x.def.name, Outcome: Compensated, FailedStep: x.failedStep, Failure: x.failure}
	for i, st := range x.steps {
		if st.status == "compensation_failed" {
			res.Unresolved = append(res.Unresolved, x.def.steps[i].Name)
		}
	}
	if len(res.Unresolved) > 0 {
		res.Outcome = Unresolved
	}
	if err := x.transition(ctx, true, "status = ?", []any{string(res.Outcome)}, -1, "", nil); err != nil {
		return Result{}, err
	}
	x.r.count(res)
	return res, nil
}

// transition writes, in one transaction fenced by the lease token, the
// instance's update (sagaSet, may be empty; release ends the lease) and
// step i's (stepSet; i < 0: none). Zero instance rows: ErrLeaseLost.
func (x *execution) transition(ctx context.Context, release bool, sagaSet string, sagaArgs []any, i int, stepSet string, stepArgs []any) error {
	return x.transitionWith(ctx, release, sagaSet, sagaArgs, i, stepSet, stepArgs, nil)
}

// transitionWith is transition running during (when not nil) inside the
// transaction, after the fenced instance update; a *stepError from it is
// returned as it is.
func (x *execution) transitionWith(ctx context.Context, release bool, sagaSet string, sagaArgs []any, i int, stepSet string, stepArgs []any, during func(*sql.Tx) error) error {
	r := x.r
	now := r.now()
	set := "updated_at = ?, version = version + 1"
	args := []any{now.UnixMilli()}
	if release {
		set += ", locked_by = NULL, locked_until = 0"
	} else {
		set += ", locked_until = ?"
		args = append(args, now.Add(r.lease).UnixMilli())
	}
	if sagaSet != "" {
		set += ", " + sagaSet
		args = append(args, sagaArgs...)
	}
	args = append(args, x.id, x.token)
	err := r.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, r.q(`UPDATE acemq_saga SET `+set+` WHERE instance_id = ? AND locked_by = ?`), args...)
		if err != nil {
			return err
		}
		n, err := sqlstore.RowsAffected(res)
		if err != nil {
			return err
		}
		if n != 1 {
			return ErrLeaseLost
		}
		if during != nil {
			if err := during(tx); err != nil {
				return err
			}
		}
		if i < 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, r.q(`UPDATE acemq_saga_step SET `+stepSet+` WHERE instance_id = ? AND step_index = ?`), append(stepArgs, x.id, i)...)
		return err
	})
	if err == ErrLeaseLost {
		return fmt.Errorf("%w (instance %s)", ErrLeaseLost, x.id)
	}
	var failed *stepError
	if errors.As(err, &failed) {
		return failed
	}
	if err != nil {
		return fmt.Errorf("acemq: cannot record a transition of saga instance %s (it resumes after its lease expires): %w", x.id, err)
	}
	return nil
}
