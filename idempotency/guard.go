package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
)

// Option configures Guard and Transactional.
type Option[T any] func(*config[T])

type config[T any] struct {
	key       func(*acemq.Message[T]) string
	lease     time.Duration
	delay     time.Duration
	retention time.Duration
	logger    *slog.Logger
}

// WithKey derives the idempotency key from the message (default: the
// envelope id). An empty key rejects the message as fatal.
func WithKey[T any](f func(*acemq.Message[T]) string) Option[T] {
	return func(c *config[T]) { c.key = f }
}

// WithLease sets the claim lease (default 5 min). It must exceed the
// longest handler run, or a slow run's key is taken over and run twice.
func WithLease[T any](d time.Duration) Option[T] { return func(c *config[T]) { c.lease = d } }

// WithInProgressDelay sets how long a message whose key is claimed
// elsewhere waits before coming back (default 5s).
func WithInProgressDelay[T any](d time.Duration) Option[T] {
	return func(c *config[T]) { c.delay = d }
}

// RetainFor sets how long Transactional's recorded keys answer as
// duplicates (default DefaultRetention): see WithRetention, its Store
// counterpart. After it a redelivery runs the handler again.
func RetainFor[T any](d time.Duration) Option[T] {
	return func(c *config[T]) {
		if d > 0 {
			c.retention = d
		}
	}
}

// WithLogger sets where confirm and release failures are logged (default
// slog.Default()).
func WithLogger[T any](l *slog.Logger) Option[T] { return func(c *config[T]) { c.logger = l } }

func newConfig[T any](opts []Option[T]) config[T] {
	c := config[T]{
		key:   func(m *acemq.Message[T]) string { return m.Envelope.ID },
		lease: DefaultLease, delay: DefaultInProgressDelay, retention: DefaultRetention, logger: slog.Default(),
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c *config[T]) keyOf(m *acemq.Message[T]) (string, *acemq.Decision) {
	k := c.key(m)
	if k == "" {
		d := acemq.Reject(acemq.Fatal(fmt.Errorf("acemq: message %s has no idempotency key; the guard cannot tell a duplicate without one", shownID(m.Envelope.ID))))
		return "", &d
	}
	return k, nil
}

// panicked is the decision the engine gives a panicking handler.
func panicked(id string, r any) acemq.Decision {
	return acemq.Reject(acemq.Fatal(fmt.Errorf("acemq: the handler panicked on message %s: %v", id, r)))
}

// Guard wraps h so its effect happens once per key (spec §7.2):
//
//   - claimed: h runs; Accept → Confirm; any other decision, or a panic →
//     Release, so a later delivery runs again (a panic is answered as the
//     engine answers one: Reject(Fatal)).
//   - duplicate (confirmed): Accept without running h.
//   - in progress (a live claim elsewhere): acemq.InProgress(5s).
//   - store error on Claim: acemq.Retry(err); an error marked acemq.Fatal
//     (a key too long for MySQL's column) dead-letters at once.
//   - empty key: Reject(Fatal).
//
// Confirm and release failures are logged and the decision stands; the
// claim then ends with its lease. The returned handler is safe for
// concurrent use if store and h are.
func Guard[T any](store Store, h acemq.Handler[T], opts ...Option[T]) acemq.Handler[T] {
	cfg := newConfig(opts)
	return func(ctx context.Context, m *acemq.Message[T]) (dec acemq.Decision) {
		key, bad := cfg.keyOf(m)
		if bad != nil {
			return *bad
		}
		cl, err := store.Claim(ctx, key, cfg.lease)
		if err != nil {
			return acemq.Retry(err)
		}
		switch cl.Outcome {
		case Duplicate:
			return acemq.Accept()
		case InProgress:
			return acemq.InProgress(cfg.delay)
		case Claimed:
		default:
			return acemq.Retry(fmt.Errorf("acemq: the idempotency store answered %v for key %q", cl.Outcome, key))
		}
		// The claim must end on every path, whatever ctx does.
		settle := func(confirm bool) {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if confirm {
				if err := store.Confirm(sctx, key, cl.Token); err != nil {
					cfg.logger.Error("acemq: cannot confirm the idempotency key; the claim ends with its lease and the message may run again", "key", key, "error", err)
				}
				return
			}
			if err := store.Release(sctx, key, cl.Token); err != nil {
				cfg.logger.Error("acemq: cannot release the idempotency key; the claim ends with its lease", "key", key, "error", err)
			}
		}
		defer func() {
			if r := recover(); r != nil {
				settle(false)
				dec = panicked(m.Envelope.ID, r)
			}
		}()
		dec = h(ctx, m)
		settle(dec.String() == "accept")
		return dec
	}
}

// TxHandler handles one message inside the database transaction tx that
// also records its key. It must do its effect through tx and must not
// commit or roll back.
type TxHandler[T any] func(ctx context.Context, tx *sql.Tx, m *acemq.Message[T]) acemq.Decision

// Transactional is the stronger guard for an effect in the same database
// (spec §7.2): for each message it begins a transaction on db, inserts the
// key as confirmed in acemq_idempotency, runs h with that transaction and
// commits on Accept; any other decision, or a panic, rolls back (a panic
// answers Reject(Fatal), as the engine would). A unique violation on the
// insert means the key was processed: roll back and Accept without
// running h; a deadlock on the insert begins again (up to three times).
// Begin, insert (other than a duplicate) and commit failures answer
// acemq.Retry; on MySQL a key longer than 255 characters answers
// Reject(Fatal) (a server not in strict mode would cut it short). No lease:
// the key and the effect commit together.
// The table must exist (SQLStore.EnsureSchema or EnsureSchema). Safe for
// concurrent use.
func Transactional[T any](db *sql.DB, dialect sqlstore.Dialect, h TxHandler[T], opts ...Option[T]) acemq.Handler[T] {
	cfg := newConfig(opts)
	return func(ctx context.Context, m *acemq.Message[T]) (dec acemq.Decision) {
		key, bad := cfg.keyOf(m)
		if bad != nil {
			return *bad
		}
		if err := dialect.Validate(); err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		if err := checkKey(dialect, key); err != nil {
			return acemq.Reject(err)
		}
		tx, stop := recordKey(ctx, db, dialect, key, cfg.retention)
		if stop != nil {
			return *stop
		}
		done := false
		defer func() {
			if !done {
				_ = tx.Rollback()
			}
			if r := recover(); r != nil {
				dec = panicked(m.Envelope.ID, r)
			}
		}()
		dec = h(ctx, tx, m)
		if dec.String() != "accept" {
			return dec
		}
		done = true
		if err := tx.Commit(); err != nil {
			if errors.Is(err, sql.ErrTxDone) {
				return acemq.Retry(fmt.Errorf("acemq: the handler ended the idempotency transaction itself; it must leave commit and rollback to Transactional: %w", err))
			}
			return acemq.Retry(fmt.Errorf("acemq: cannot commit the idempotency transaction for key %q: %w", key, err))
		}
		return dec
	}
}

// recordKey begins the transaction and inserts key as confirmed in it,
// kept for retention. It returns the transaction, or the decision when
// there is nothing to run: Accept for a key already recorded within its
// window, Retry when the database failed. A
// deadlock on the insert (InnoDB's, when deliveries of one message waited
// on a run that rolled back) begins again, up to three times: the handler
// has not run, and the winner's key then answers as a duplicate.
func recordKey(ctx context.Context, db *sql.DB, dialect sqlstore.Dialect, key string, retention time.Duration) (*sql.Tx, *acemq.Decision) {
	now := nowSQL(dialect)
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			d := acemq.Retry(fmt.Errorf("acemq: cannot begin the idempotency transaction: %w", err))
			return nil, &d
		}
		_, err = tx.ExecContext(ctx, dialect.Rebind(`INSERT INTO acemq_idempotency (message_id, state, claimed_by, recorded_at, expires_at) VALUES (?, 'confirmed', NULL, `+now+`, `+now+` + ?)`),
			key, nil, nil, retention.Milliseconds())
		if err == nil {
			return tx, nil
		}
		_ = tx.Rollback()
		switch {
		case sqlstore.IsUniqueViolation(err):
			// Recorded: a duplicate, unless the key's window ended; then
			// it is forgotten and the message runs again.
			if attempt < 3 && forget(ctx, db, dialect, key) {
				continue
			}
			d := acemq.Accept()
			return nil, &d
		case sqlstore.IsDeadlock(err) && attempt < 3:
			continue
		}
		d := acemq.Retry(fmt.Errorf("acemq: cannot record idempotency key %q: %w", key, err))
		return nil, &d
	}
}

// forget deletes key when its window ended (a confirmed key's retention,
// a claim's lease) and reports whether it did.
func forget(ctx context.Context, db *sql.DB, dialect sqlstore.Dialect, key string) bool {
	res, err := db.ExecContext(ctx, dialect.Rebind(`DELETE FROM acemq_idempotency WHERE message_id = ? AND expires_at < `+nowSQL(dialect)), key, nil)
	if err != nil {
		return false
	}
	n, err := sqlstore.RowsAffected(res)
	return err == nil && n == 1
}

// EnsureSchema creates the acemq_idempotency table in db if missing, for
// Transactional users who have no SQLStore.
func EnsureSchema(ctx context.Context, db *sql.DB, dialect sqlstore.Dialect) error {
	if err := dialect.Validate(); err != nil {
		return err
	}
	return ensureSchema(ctx, db, dialect)
}

// shownID is id as an error or log line shows it: whole up to 64 bytes,
// else its first 64 (cut back to whole UTF-8 characters) and its length,
// so a publisher's 60,000-byte id does not make a 60 KB line. It is the
// root module's internal/idtext.Short, which a module of its own does not
// import.
func shownID(id string) string {
	if len(id) <= 64 {
		return id
	}
	return strings.ToValidUTF8(id[:64], "") + "… (" + strconv.Itoa(len(id)) + " bytes)"
}
