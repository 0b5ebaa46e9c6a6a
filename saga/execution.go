package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// ErrAbandoned is returned when a run stopped part way and left its
// instance to a sweep: the caller's context ended while the instance was
// moving forward (Run, Sweep), or the runner's Close gave up waiting for
// it (WithSweepEvery). The call under way had its context cancelled,
// nothing of it was recorded (the instance stays running or compensating,
// never failed because of this) and the lease was released, so the next
// sweep of any runner re-runs that call. The error wraps the context's
// cause.
var ErrAbandoned = errors.New("acemq: the saga instance was abandoned part way (the caller's context ended, or the runner's Close gave up waiting); nothing of the interrupted call was recorded and its lease was released, so the next sweep (of any runner) re-runs that call")

// errTakenOver and errLeaseMargin are why a lease was lost.
var (
	errTakenOver   = errors.New("a renewal found the instance taken over by another runner")
	errLeaseMargin = errors.New("no renewal of the lease went through for three quarters of it, so this runner stopped before the lease could expire")
	errTimedOut    = errors.New("the step's timeout passed")
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
	// waiting: the call under way is cancelled and not recorded, a
	// compensation too.
	abandon context.Context
	// hold keeps the lease while run runs.
	hold *lease
}

// release ends the lease of an abandoned instance at once (best effort:
// otherwise it expires), so the next sweep takes it.
func (x *execution) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = x.r.db.ExecContext(ctx, x.r.d.Rebind(`UPDATE acemq_saga SET locked_until = 0, version = version + 1 WHERE instance_id = ? AND locked_by = ?`), x.id, x.token)
}

// run carries the instance on from status to its end, keeping the lease
// meanwhile; held is when the write that took the lease started.
func (x *execution) run(ctx context.Context, status string, held time.Time) (res Result, err error) {
	x.hold = x.keep(held)
	defer func() {
		x.hold.stop()
		if errors.Is(err, ErrAbandoned) {
			x.release()
		}
	}()
	if status == StatusRunning {
		return x.forward(ctx)
	}
	return x.compensate(ctx)
}

func (x *execution) call(i int, attempt int, uncertain bool) Call {
	return Call{InstanceID: x.id, Saga: x.def.name, Step: x.def.steps[i].Name, Subject: x.subject, ContentType: x.contentType,
		IdempotencyKey: x.id + "/" + x.def.steps[i].Name, Attempt: attempt, Uncertain: uncertain}
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

// outcome is how one call of an action or compensation ended: recorded
// (both nil), failed (the call's error, a panic or its timeout), or the
// run must stop (stop: ErrAbandoned, ErrLeaseLost or a failed write).
type outcome struct {
	failed   error
	timedOut bool
	stop     error
}

// halted says why the instance must not start another call: the caller's
// context (or the runner's Close) ended, or the lease is lost.
func (x *execution) halted(base context.Context) error {
	if base.Err() != nil {
		return fmt.Errorf("%w (instance %s): %w", ErrAbandoned, x.id, context.Cause(base))
	}
	if cause := x.hold.lost(); cause != nil {
		return fmt.Errorf("%w (instance %s): %w", ErrLeaseLost, x.id, cause)
	}
	return nil
}

// attempt runs step i's action (or compensation) f / tf on a context that
// ends with base, with the lease (cancelled at once when it is lost) and
// with the step's timeout, and, when it succeeds, records doneSet on the
// step: in one transaction with tf, after f otherwise (fenced by the
// lease, whatever base does by then: the effect happened).
func (x *execution) attempt(base context.Context, i int, f Func, tf TxFunc, c Call, doneSet string) outcome {
	timeout := x.def.steps[i].Timeout
	if timeout <= 0 {
		timeout = x.r.stepTimeout
	}
	cctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	defer context.AfterFunc(x.hold.ctx, func() { cancel(context.Cause(x.hold.ctx)) })()
	stopTimer := x.r.clock.AfterFunc(timeout, func() { cancel(errTimedOut) })
	defer stopTimer()

	var err error
	if tf == nil {
		if err = invoke(cctx, f, c); err == nil {
			if werr := x.transition(base, false, "", nil, i, doneSet, nil); werr != nil {
				return outcome{stop: werr}
			}
			return outcome{}
		}
	} else {
		err = x.transitionWith(cctx, false, "", nil, i, doneSet, nil, func(tx *sql.Tx) error {
			if err := invokeTx(cctx, tf, tx, c); err != nil {
				return &stepError{err}
			}
			return nil
		})
		if err == nil {
			return outcome{}
		}
	}
	if stop := x.halted(base); stop != nil {
		return outcome{stop: stop}
	}
	if context.Cause(cctx) == errTimedOut {
		return outcome{timedOut: true, failed: fmt.Errorf("acemq: step %q of saga %q did not return within its timeout of %v (Step.Timeout, saga.WithStepTimeout), so its context was cancelled: %w", c.Step, c.Saga, timeout, err)}
	}
	var failed *stepError
	if errors.As(err, &failed) || tf == nil {
		if failed != nil {
			err = failed.err
		}
		return outcome{failed: err}
	}
	return outcome{stop: err}
}

func (x *execution) forward(ctx context.Context) (Result, error) {
	for i := range x.def.steps {
		if x.steps[i].status == "done" {
			continue
		}
		if err := x.halted(ctx); err != nil {
			return Result{}, err
		}
		attempt := x.steps[i].attempts + 1
		if err := x.transition(ctx, false, "", nil, i, "status = 'running', attempts = ?, started_at = {now}, finished_at = NULL", []any{attempt}); err != nil {
			return Result{}, err
		}
		x.steps[i] = stepState{status: "running", attempts: attempt}
		st := x.def.steps[i]
		out := x.attempt(ctx, i, st.Action, st.TxAction, x.call(i, attempt, false), "status = 'done', finished_at = {now}")
		if out.stop != nil {
			return Result{}, out.stop
		}
		if out.failed == nil {
			x.steps[i].status = "done"
			continue
		}
		// A step whose action may have taken effect all the same (it
		// timed out, or an earlier attempt was interrupted before its end
		// was recorded) is compensated like a done one, its compensation
		// told so (Call.Uncertain); a TxAction's never took effect.
		status := "failed"
		if st.TxAction == nil && (out.timedOut || attempt > 1) {
			status = "compensating"
		}
		x.failedStep, x.failure = st.Name, out.failed.Error()
		if err := x.transition(ctx, false, "status = 'compensating', failed_step = ?, failure = ?", []any{x.failedStep, x.failure},
			i, "status = ?, last_error = ?, finished_at = {now}", []any{status, x.failure}); err != nil {
			return Result{}, err
		}
		x.steps[i].status = status
		return x.compensate(ctx)
	}
	if err := x.transition(ctx, true, "status = 'completed'", nil, -1, "", nil); err != nil {
		return Result{}, err
	}
	res := Result{InstanceID: x.id, Saga: x.def.name, Outcome: Completed}
	x.r.count(res)
	return res, nil
}

// compensate undoes, in reverse, the steps done (and re-runs one left
// compensating, or compensates the failed step whose action may have
// taken effect). Compensations run to their end whatever ctx does: only
// the runner's Close (abandon) or a lost lease interrupts them.
func (x *execution) compensate(ctx context.Context) (Result, error) {
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	if x.abandon != nil {
		defer context.AfterFunc(x.abandon, func() { cancel(context.Cause(x.abandon)) })()
	}
	for i := len(x.steps) - 1; i >= 0; i-- {
		st := x.steps[i]
		if st.status != "done" && st.status != "compensating" {
			continue
		}
		if err := x.halted(base); err != nil {
			return Result{}, err
		}
		def := x.def.steps[i]
		if def.Compensate == nil && def.TxCompensate == nil {
			if err := x.transition(base, false, "", nil, i, "status = 'no_compensation', finished_at = {now}", nil); err != nil {
				return Result{}, err
			}
			x.steps[i].status = "no_compensation"
			continue
		}
		attempt := st.attempts + 1
		if err := x.transition(base, false, "", nil, i, "status = 'compensating', attempts = ?, started_at = {now}, finished_at = NULL", []any{attempt}); err != nil {
			return Result{}, err
		}
		x.steps[i] = stepState{status: "compensating", attempts: attempt}
		// The failed step is compensated only when its action may have
		// taken effect (see forward).
		out := x.attempt(base, i, def.Compensate, def.TxCompensate, x.call(i, attempt, def.Name == x.failedStep), "status = 'compensated', finished_at = {now}")
		if out.stop != nil {
			return Result{}, out.stop
		}
		if out.failed != nil {
			if err := x.transition(base, false, "", nil, i, "status = 'compensation_failed', last_error = ?, finished_at = {now}", []any{out.failed.Error()}); err != nil {
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
	if err := x.transition(base, true, "status = ?", []any{string(res.Outcome)}, -1, "", nil); err != nil {
		return Result{}, err
	}
	x.r.count(res)
	return res, nil
}

// transition writes, in one transaction fenced by the lease token, the
// instance's update (sagaSet, may be empty; release ends the lease) and
// step i's (stepSet; i < 0: none); {now} in either is the current time.
// Zero instance rows: ErrLeaseLost. It runs on a context of its own,
// detached from ctx's cancellation and bounded by the lease: a transition
// records what happened, whatever the caller does meanwhile.
func (x *execution) transition(ctx context.Context, release bool, sagaSet string, sagaArgs []any, i int, stepSet string, stepArgs []any) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.r.lease)
	defer cancel()
	return x.transitionWith(wctx, release, sagaSet, sagaArgs, i, stepSet, stepArgs, nil)
}

// transitionWith is transition on ctx itself (when it ends the
// transaction rolls back), running during (when not nil) inside the
// transaction, after the fenced instance update; a *stepError from it is
// returned as it is. A write that did not release the lease extended it
// to a full lease from when it started.
func (x *execution) transitionWith(ctx context.Context, release bool, sagaSet string, sagaArgs []any, i int, stepSet string, stepArgs []any, during func(*sql.Tx) error) error {
	r := x.r
	set := "updated_at = {now}, version = version + 1"
	var args []any
	if release {
		set += ", locked_by = NULL, locked_until = 0"
	} else {
		set += ", locked_until = {now} + ?"
		args = append(args, r.lease.Milliseconds())
	}
	if sagaSet != "" {
		set += ", " + sagaSet
		args = append(args, sagaArgs...)
	}
	args = append(args, x.id, x.token)
	start := r.clock.Now()
	err := r.inTx(ctx, func(tx *sql.Tx) error {
		q, a := r.bind(`UPDATE acemq_saga SET `+set+` WHERE instance_id = ? AND locked_by = ?`, args...)
		res, err := tx.ExecContext(ctx, q, a...)
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
		q, a = r.bind(`UPDATE acemq_saga_step SET `+stepSet+` WHERE instance_id = ? AND step_index = ?`, append(append([]any(nil), stepArgs...), x.id, i)...)
		_, err = tx.ExecContext(ctx, q, a...)
		return err
	})
	if err == ErrLeaseLost {
		return fmt.Errorf("%w (instance %s): %w", ErrLeaseLost, x.id, errTakenOver)
	}
	var failed *stepError
	if errors.As(err, &failed) {
		return failed
	}
	if err != nil {
		return fmt.Errorf("acemq: cannot record a transition of saga instance %s (it resumes after its lease expires): %w", x.id, err)
	}
	if !release && x.hold != nil {
		x.hold.extended(start)
	}
	return nil
}
