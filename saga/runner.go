package saga

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
)

// DefaultLease is how long a runner owns an instance it is running
// without renewing: 5 minutes (renewed every quarter of it while
// running). A sweep takes over an instance whose lease expired.
const DefaultLease = 5 * time.Minute

// DefaultStepTimeout is how long one call of an action or a compensation
// may run before its context is cancelled and the call counts as failed
// (see WithStepTimeout and Step.Timeout).
const DefaultStepTimeout = time.Minute

// Outcome is how a run ended.
type Outcome string

// The outcomes of a run (also the terminal instance statuses).
const (
	// Completed: every action succeeded.
	Completed Outcome = "completed"
	// Compensated: an action failed and every completed step was
	// compensated (or had nothing to compensate).
	Compensated Outcome = "compensated"
	// Unresolved: an action failed and at least one compensation failed
	// too; the instance waits for a person (Resolve or Compensate).
	Unresolved Outcome = "unresolved"
)

// Instance statuses (acemq_saga.status) that are not outcomes.
const (
	StatusRunning      = "running"
	StatusCompensating = "compensating"
)

// ErrLeaseLost is returned when this runner lost an instance's lease: a
// renewal found it taken over by another runner, or no renewal went
// through for three quarters of the lease (a paused process, a database
// out of reach), when the runner stops so that it is done before the
// lease can expire. The call under way had its context cancelled and
// nothing more of the instance is written by this runner; once the lease
// expired a sweep (of any runner) carries it on.
var ErrLeaseLost = errors.New("acemq: the saga instance's lease was lost (taken over by another runner, or not renewed for three quarters of it); this runner stopped and wrote nothing more, and a sweep carries the instance on once the lease expired")

// Result is the end of a run.
type Result struct {
	InstanceID string
	Saga       string
	Outcome    Outcome
	// FailedStep and Failure name the step whose action failed and why
	// (empty when Completed).
	FailedStep string
	Failure    string
	// Unresolved lists the steps whose compensation failed.
	Unresolved []string
}

// Runner runs saga instances on a database, resumes those whose lease
// expired (Sweep) and serves operators. Safe for concurrent use; any
// number of runners, in any number of processes, may share a database.
type Runner struct {
	db *sql.DB
	timing
	owner       string
	lease       time.Duration
	stepTimeout time.Duration
	runs        metric.Int64Counter

	mu   sync.Mutex
	defs map[string]*Definition

	loop      *sweepLoop // nil without WithSweepEvery
	closeOnce sync.Once

	// beforeRenew and afterRenew run around each renewal of a lease
	// (tests: a runner paused while its step runs; waiting for a
	// renewal).
	beforeRenew, afterRenew func()
}

// Option configures a Runner.
type Option func(*Runner) error

// WithLease sets how long a runner owns an instance without renewing it
// (default DefaultLease). Shorter: a crashed runner's instances resume
// sooner; a lease must outlast a stalled renewal, so keep it at seconds
// or more in production. Under 30ms is refused.
func WithLease(d time.Duration) Option {
	return func(r *Runner) error {
		if d < 30*time.Millisecond {
			return fmt.Errorf("acemq: saga lease %v is too short; give at least 30ms (seconds or more in production)", d)
		}
		r.lease = d
		return nil
	}
}

// WithStepTimeout sets how long one call of an action or a compensation
// may run (default DefaultStepTimeout; Step.Timeout overrides it for one
// step). When it passes, the call's context is cancelled and the call
// counts as failed: an action so failing starts compensation, in which
// the step itself is compensated too, its Call marked Uncertain (it may
// have taken effect); a compensation so failing leaves the instance
// unresolved. A call that ignores its context still holds its instance
// until it returns. Zero or less is refused.
func WithStepTimeout(d time.Duration) Option {
	return func(r *Runner) error {
		if d <= 0 {
			return fmt.Errorf("acemq: saga step timeout %v must be positive", d)
		}
		r.stepTimeout = d
		return nil
	}
}

// WithOwner names this runner in locked_by (up to 40 bytes; default a
// random name), so operators see who holds an instance.
func WithOwner(name string) Option {
	return func(r *Runner) error {
		if name == "" || len(name) > 40 {
			return fmt.Errorf("acemq: saga owner %q must be 1 to 40 bytes", name)
		}
		r.owner = name
		return nil
	}
}

// WithMeterProvider counts finished runs on mp as acemq.saga.run.total
// {saga, outcome=completed|compensated|unresolved}; unresolved is the one
// to alert on. Default: no metrics.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(r *Runner) error {
		if mp == nil {
			return errors.New("acemq: saga.WithMeterProvider needs a MeterProvider")
		}
		// The API returns a working no-op instrument alongside any error.
		r.runs, _ = mp.Meter(acemq.InstrumentationScope).Int64Counter("acemq.saga.run.total",
			metric.WithUnit("{run}"), metric.WithDescription("Saga runs (and resumed runs) by outcome; unresolved ones wait for a person."))
		return nil
	}
}

// NewRunner returns a runner over db. It does not touch the database
// (call EnsureSchema once), except through the periodic sweep that
// WithSweepEvery starts; a runner with one must be closed (Close).
func NewRunner(db *sql.DB, d sqlstore.Dialect, opts ...Option) (*Runner, error) {
	if db == nil {
		return nil, errors.New("acemq: saga.NewRunner needs a *sql.DB")
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{db: db, timing: timing{d: d, clock: systemClock{}, dbClock: true}, owner: "runner-" + randHex(6),
		lease: DefaultLease, stepTimeout: DefaultStepTimeout, defs: map[string]*Definition{}}
	r.runs, _ = noop.NewMeterProvider().Meter("").Int64Counter("acemq.saga.run.total")
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(r); err != nil {
			return nil, err
		}
	}
	r.startLoop()
	return r, nil
}

// EnsureSchema creates the saga tables if missing (see the package's
// EnsureSchema). Idempotent.
func (r *Runner) EnsureSchema(ctx context.Context) error { return EnsureSchema(ctx, r.db, r.d) }

// Register makes definitions known to Sweep, which resumes only instances
// of sagas it knows. Run registers its definition itself. Registering a
// second, different definition under a name already registered fails.
func (r *Runner) Register(defs ...*Definition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range defs {
		if d == nil {
			return errors.New("acemq: saga.Register got a nil Definition; build one with saga.Define")
		}
		if old, ok := r.defs[d.name]; ok && old != d {
			return fmt.Errorf("acemq: a different saga %q is already registered on this runner; give each saga a name of its own", d.name)
		}
		r.defs[d.name] = d
	}
	return nil
}

// Run starts a new instance of def with subject (stored, and given to every
// action) and runs it to its end: Completed, Compensated or Unresolved.
// Every transition is written before the next action runs. Run never
// panics; a panicking action is a failed action.
//
// The error is non-nil when the run stopped short of an end, the instance
// left for a Sweep (of any runner): ErrAbandoned when ctx ended while the
// instance was moving forward (the action under way had its context
// cancelled, nothing of that call was recorded, and the lease was
// released, so the next sweep re-runs it: a caller that goes away never
// fails or compensates the saga); ErrLeaseLost; or a failed write of a
// transition (the instance resumes after its lease expires). Once an
// action failed, the compensations run to their end whatever ctx does.
func (r *Runner) Run(ctx context.Context, def *Definition, subject []byte, contentType string) (Result, error) {
	if def == nil {
		return Result{}, errors.New("acemq: saga.Run needs a Definition; build one with saga.Define")
	}
	if err := r.Register(def); err != nil {
		return Result{}, err
	}
	id := randHex(16)
	x := &execution{r: r, def: def, id: id, token: r.token(), subject: subject, contentType: contentType}
	start := r.clock.Now()
	err := r.inTx(ctx, func(tx *sql.Tx) error {
		q, args := r.bind(`INSERT INTO acemq_saga (instance_id, saga_name, subject, subject_content_type, status, created_at, updated_at, locked_by, locked_until, version) VALUES (?, ?, ?, ?, 'running', {now}, {now}, ?, {now} + ?, 1)`,
			id, def.name, subject, contentType, x.token, r.lease.Milliseconds())
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		for i, s := range def.steps {
			if _, err := tx.ExecContext(ctx, r.d.Rebind(`INSERT INTO acemq_saga_step (instance_id, step_index, step_name, status, attempts) VALUES (?, ?, ?, 'pending', 0)`), id, i, s.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("acemq: cannot record a new instance of saga %q: %w", def.name, err)
	}
	x.steps = make([]stepState, len(def.steps))
	for i := range x.steps {
		x.steps[i].status = "pending"
	}
	return x.run(ctx, StatusRunning, start)
}

// Sweep claims the instances, of sagas registered on this runner, whose
// lease expired while running or compensating, and finishes each: a
// running one re-runs the step left running and carries on; a
// compensating one carries on in reverse, re-running a compensation left
// compensating. Unresolved instances are never taken. It returns the
// results of the instances it finished, and the errors it met joined.
// Call it periodically (every lease or so), from any number of processes,
// or let WithSweepEvery do so.
func (r *Runner) Sweep(ctx context.Context) ([]Result, error) {
	return r.sweep(ctx, nil, nil)
}

// sweep is Sweep that stops before the next instance once stop is closed
// (nil: never), and whose executions are abandoned when abandon ends
// (nil: never).
func (r *Runner) sweep(ctx context.Context, stop <-chan struct{}, abandon context.Context) ([]Result, error) {
	r.mu.Lock()
	names := make([]any, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	r.mu.Unlock()
	if len(names) == 0 {
		return nil, nil
	}
	q, args := r.bind(`SELECT instance_id FROM acemq_saga WHERE status IN ('running', 'compensating') AND locked_until < {now} AND saga_name IN (`+sqlstore.List(len(names))+`) ORDER BY updated_at LIMIT 100`, names...)
	ids, err := sqlstore.Column(ctx, r.db, q, args...)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot look for saga instances to resume: %w", err)
	}
	var results []Result
	var errs []error
	for _, v := range ids {
		if stop != nil {
			select {
			case <-stop:
				return results, errors.Join(errs...)
			default:
			}
		}
		id := v.(string)
		res, ok, err := r.resume(ctx, id, abandon)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			results = append(results, res)
		}
	}
	return results, errors.Join(errs...)
}

func (r *Runner) resume(ctx context.Context, id string, abandon context.Context) (Result, bool, error) {
	token := r.token()
	start := r.clock.Now()
	q, args := r.bind(`UPDATE acemq_saga SET locked_by = ?, locked_until = {now} + ?, updated_at = {now}, version = version + 1 WHERE instance_id = ? AND status IN ('running', 'compensating') AND locked_until < {now}`,
		token, r.lease.Milliseconds(), id)
	res, err := r.db.ExecContext(ctx, q, args...)
	if err != nil {
		return Result{}, false, fmt.Errorf("acemq: cannot claim saga instance %s: %w", id, err)
	}
	n, err := sqlstore.RowsAffected(res)
	if err != nil || n != 1 {
		return Result{}, false, err // another runner was first
	}
	inst, err := r.load(ctx, r.db, id)
	if err != nil {
		return Result{}, false, err
	}
	r.mu.Lock()
	def := r.defs[inst.Saga]
	r.mu.Unlock()
	x := &execution{r: r, def: def, id: id, token: token, subject: inst.Subject, contentType: inst.ContentType,
		failedStep: inst.FailedStep, failure: inst.Failure, abandon: abandon}
	if len(inst.Steps) != len(def.steps) {
		return r.orphan(ctx, x, fmt.Sprintf("the instance has %d steps and the registered saga %q has %d; the definition changed while it ran", len(inst.Steps), def.name, len(def.steps)))
	}
	x.steps = make([]stepState, len(inst.Steps))
	for i, s := range inst.Steps {
		if s.Name != def.steps[i].Name {
			return r.orphan(ctx, x, fmt.Sprintf("step %d is %q in the instance and %q in the registered saga %q; the definition changed while it ran", i+1, s.Name, def.steps[i].Name, def.name))
		}
		x.steps[i] = stepState{status: s.Status, attempts: s.Attempts}
	}
	out, err := x.run(ctx, inst.Status, start)
	return out, err == nil, err
}

// orphan marks an instance that no longer matches its definition
// unresolved: only a person can tell what to do with it.
func (r *Runner) orphan(ctx context.Context, x *execution, why string) (Result, bool, error) {
	x.failure = "acemq: " + why
	if err := x.transition(ctx, true, "status = 'unresolved', failure = ?", []any{x.failure}, -1, "", nil); err != nil {
		return Result{}, false, err
	}
	res := Result{InstanceID: x.id, Saga: x.def.name, Outcome: Unresolved, FailedStep: x.failedStep, Failure: x.failure}
	r.count(res)
	return res, true, nil
}

func (r *Runner) count(res Result) {
	r.runs.Add(context.Background(), 1, metric.WithAttributes(attribute.String("saga", res.Saga), attribute.String("outcome", string(res.Outcome))))
}

func (r *Runner) token() string { return r.owner + ":" + randHex(8) }

func (r *Runner) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
