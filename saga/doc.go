// Package saga runs persisted sagas: named, ordered steps, each an action
// and an optional compensation, whose every transition is written to a SQL
// database (PostgreSQL, SQLite, MySQL) before the next action runs, so a
// saga interrupted by a crash is finished by another process (behaviour
// spec §7.8).
//
// A Definition names the steps. A Runner starts instances (Run), resumes
// instances whose lease expired (Sweep, or periodically with
// WithSweepEvery until Close) and serves operators (List, Show, Resolve,
// Compensate). On a failure or a panic in an action the steps
// that completed are compensated in reverse order, on a context detached
// from the caller's cancellation; a step without a compensation is
// skipped (no_compensation); a compensation that fails does not stop the
// others and leaves the instance unresolved, for a person to look at
// (`acemq saga list --status unresolved`).
//
// Actions and compensations may run more than once (a process that dies
// after an action's effect but before its transition is written leaves the
// step running, and the sweep runs it again). Each call gets an
// idempotency key, "<instance id>/<step name>", the same on every attempt:
// record it in the same transaction as the effect and skip the effect when
// it is already there. Or write the effect in the transition itself: a
// Step's TxAction (TxCompensate) is handed the *sql.Tx that records the
// step done (compensated), so an outbox.Store.Add in it publishes exactly
// once, with the transition.
//
// # Leases, timeouts and the caller
//
// A runner holds each instance it carries on with a lease (WithLease),
// written and compared on the database's clock, never a runner's own. It
// renews the lease every quarter of it, and when no renewal went through
// for three quarters of it (a paused process, a database out of reach) or
// a renewal finds the instance taken over, it cancels the context of the
// call under way at once and writes nothing more (ErrLeaseLost): it has
// stopped before another runner can take the instance. A step whose action
// may have taken effect without its end being recorded (an earlier
// attempt interrupted, or the action timed out) and then fails is
// compensated like a done step, its compensation's Call marked Uncertain.
// Each call of an action or compensation has a timeout (WithStepTimeout,
// Step.Timeout; default DefaultStepTimeout). A caller whose context ends
// while its instance moves forward abandons it (ErrAbandoned): nothing of
// the interrupted call is recorded, the lease is released, the next sweep
// re-runs the call, and the saga is never failed nor compensated for it;
// compensations, once started, run to their end whatever the caller does.
//
// Tables (created by EnsureSchema): acemq_saga, one row per instance, and
// acemq_saga_step, one row per step of an instance.
//
// The manual's page on sagas: https://github.com/acemq-go/acemq/blob/main/docs/sagas.md
package saga
