package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// Instance is an instance's row, with its steps when read by Show.
type Instance struct {
	ID          string
	Saga        string
	Subject     []byte
	ContentType string
	// Status is running, compensating, completed, compensated or
	// unresolved.
	Status     string
	FailedStep string
	Failure    string
	Created    time.Time
	Updated    time.Time
	LockedBy   string
	// LockedUntil is when the lease expires (zero when none is held).
	LockedUntil time.Time
	Version     int64
	Steps       []StepRecord
}

// StepRecord is one acemq_saga_step row.
type StepRecord struct {
	Index int
	Name  string
	// Status is pending, running, done, failed, compensating,
	// compensated, compensation_failed or no_compensation.
	Status    string
	Attempts  int
	LastError string
	Started   time.Time
	Finished  time.Time
}

// Store reads and changes saga instances for operators, without running
// anything: List, Show, Resolve and Compensate. A Runner is one too (it
// embeds these methods). Safe for concurrent use.
type Store struct {
	db *sql.DB
	timing
}

// NewStore returns the operators' view of the saga tables in db.
func NewStore(db *sql.DB, d sqlstore.Dialect) (*Store, error) {
	if db == nil {
		return nil, errors.New("acemq: saga.NewStore needs a *sql.DB")
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Store{db: db, timing: timing{d: d, clock: systemClock{}, dbClock: true}}, nil
}

func (r *Runner) store() *Store { return &Store{db: r.db, timing: r.timing} }

// List returns up to 1000 instances (newest first) with one of statuses,
// or of any status when none is given; without steps.
func (r *Runner) List(ctx context.Context, statuses ...string) ([]Instance, error) {
	return r.store().List(ctx, statuses...)
}

// Show returns an instance with its steps.
func (r *Runner) Show(ctx context.Context, id string) (Instance, error) {
	return r.store().Show(ctx, id)
}

// Resolve marks an unresolved instance resolved by a person (see
// Store.Resolve).
func (r *Runner) Resolve(ctx context.Context, id, note string) error {
	return r.store().Resolve(ctx, id, note)
}

// Compensate asks for another compensation of an unresolved instance
// (see Store.Compensate).
func (r *Runner) Compensate(ctx context.Context, id string) error {
	return r.store().Compensate(ctx, id)
}

const instanceColumns = `instance_id, saga_name, subject, subject_content_type, status, failed_step, failure, created_at, updated_at, locked_by, locked_until, version`

// List returns up to 1000 instances (newest first) with one of statuses,
// or of any status when none is given; without steps.
func (s *Store) List(ctx context.Context, statuses ...string) ([]Instance, error) {
	query := `SELECT ` + instanceColumns + ` FROM acemq_saga`
	var args []any
	if len(statuses) > 0 {
		query += ` WHERE status IN (` + sqlstore.List(len(statuses)) + `)`
		for _, st := range statuses {
			args = append(args, st)
		}
	}
	rows, err := s.db.QueryContext(ctx, s.d.Rebind(query+` ORDER BY created_at DESC LIMIT 1000`), args...)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot list saga instances; check the database, and that saga.EnsureSchema created its tables: %w", err)
	}
	return scanInstances(rows)
}

// Show returns an instance with its steps; an unknown id is an error
// saying so.
func (s *Store) Show(ctx context.Context, id string) (Instance, error) {
	return load(ctx, s.db, s.d, id)
}

func (r *Runner) load(ctx context.Context, db *sql.DB, id string) (Instance, error) {
	return load(ctx, db, r.d, id)
}

func load(ctx context.Context, db *sql.DB, d sqlstore.Dialect, id string) (Instance, error) {
	rows, err := db.QueryContext(ctx, d.Rebind(`SELECT `+instanceColumns+` FROM acemq_saga WHERE instance_id = ?`), id)
	if err != nil {
		return Instance{}, fmt.Errorf("acemq: cannot read saga instance %s; check the database, and that saga.EnsureSchema created its tables: %w", id, err)
	}
	list, err := scanInstances(rows)
	if err != nil {
		return Instance{}, err
	}
	if len(list) == 0 {
		return Instance{}, fmt.Errorf("acemq: no saga instance %q; list them with `acemq saga list`", id)
	}
	inst := list[0]
	rows, err = db.QueryContext(ctx, d.Rebind(`SELECT step_index, step_name, status, attempts, last_error, started_at, finished_at FROM acemq_saga_step WHERE instance_id = ? ORDER BY step_index`), id)
	if err != nil {
		return Instance{}, fmt.Errorf("acemq: cannot read the steps of saga instance %s: %w", id, err)
	}
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "step_index", "step_name", "status", "attempts", "last_error", "started_at", "finished_at")
	if err != nil {
		return Instance{}, err
	}
	for rows.Next() {
		var st StepRecord
		var lastErr sql.NullString
		var started, finished sql.NullInt64
		if err := sqlstore.ScanNamed(rows, idx, map[string]any{"step_index": &st.Index, "step_name": &st.Name, "status": &st.Status,
			"attempts": &st.Attempts, "last_error": &lastErr, "started_at": &started, "finished_at": &finished}); err != nil {
			return Instance{}, err
		}
		st.LastError = lastErr.String
		st.Started, st.Finished = millis(started.Int64), millis(finished.Int64)
		inst.Steps = append(inst.Steps, st)
	}
	return inst, rows.Err()
}

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func scanInstances(rows *sql.Rows) ([]Instance, error) {
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, strings.Split(strings.ReplaceAll(instanceColumns, " ", ""), ",")...)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for rows.Next() {
		var in Instance
		var ct, failed, failure, lockedBy sql.NullString
		var created, updated, until int64
		if err := sqlstore.ScanNamed(rows, idx, map[string]any{"instance_id": &in.ID, "saga_name": &in.Saga, "subject": &in.Subject,
			"subject_content_type": &ct, "status": &in.Status, "failed_step": &failed, "failure": &failure, "created_at": &created,
			"updated_at": &updated, "locked_by": &lockedBy, "locked_until": &until, "version": &in.Version}); err != nil {
			return nil, err
		}
		in.ContentType, in.FailedStep, in.Failure, in.LockedBy = ct.String, failed.String, failure.String, lockedBy.String
		in.Created, in.Updated, in.LockedUntil = millis(created), millis(updated), millis(until)
		out = append(out, in)
	}
	return out, rows.Err()
}

// Resolve marks an unresolved instance as dealt with by a person: its
// status becomes compensated and note (who did what) is added to its
// failure text; its steps keep their compensation_failed record. It fails
// for an instance that is not unresolved.
func (s *Store) Resolve(ctx context.Context, id, note string) error {
	if strings.TrimSpace(note) == "" {
		note = "no note"
	}
	q, args := s.bind(`UPDATE acemq_saga SET status = 'compensated', failure = ?, updated_at = {now}, version = version + 1 WHERE instance_id = ? AND status = 'unresolved'`,
		"resolved by an operator ("+note+")", id)
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("acemq: cannot resolve saga instance %s: %w", id, err)
	}
	return s.one(res, id)
}

func (s *Store) one(res sql.Result, id string) error {
	n, err := sqlstore.RowsAffected(res)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("acemq: saga instance %q is not unresolved (or does not exist); see `acemq saga show %s`", id, id)
	}
	return nil
}

// Compensate asks for another compensation of an unresolved instance: its
// compensation_failed steps become done again and the instance
// compensating with an expired lease, so the next Sweep of a runner that
// has the saga registered runs those compensations again (in reverse). It
// fails for an instance that is not unresolved.
func (s *Store) Compensate(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("acemq: cannot request compensation of saga instance %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	q, args := s.bind(`UPDATE acemq_saga SET status = 'compensating', locked_by = NULL, locked_until = 0, updated_at = {now}, version = version + 1 WHERE instance_id = ? AND status = 'unresolved'`, id)
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("acemq: cannot request compensation of saga instance %s: %w", id, err)
	}
	if err := s.one(res, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE acemq_saga_step SET status = 'done' WHERE instance_id = ? AND status = 'compensation_failed'`), id); err != nil {
		return fmt.Errorf("acemq: cannot request compensation of saga instance %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("acemq: cannot request compensation of saga instance %s: %w", id, err)
	}
	return nil
}
