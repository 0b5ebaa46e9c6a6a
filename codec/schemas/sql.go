package schemas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// SQL is a registry in two tables (behaviour §7.13):
//
//	acemq_schemas(id BIGINT PK, subject VARCHAR(255), version INTEGER, format VARCHAR(32),
//	  definition TEXT, fingerprint CHAR(64), registered_at BIGINT,
//	  UNIQUE(subject, fingerprint), UNIQUE(subject, version))
//	acemq_schemas_seq(name VARCHAR(32) PK, next_id BIGINT)
//
// Ids come from the locked sequence row, so registrations from many
// processes never share an id; registered_at is Unix milliseconds. It is
// safe for concurrent use by many goroutines and processes. Every error
// from the database is returned as it is (wrapped), so a caller can tell
// "not found" (ErrNotFound) from "could not ask".
type SQL struct {
	db  *sql.DB
	d   sqlstore.Dialect
	cfg config
}

const seqName = "acemq_schemas"

// NewSQL creates the tables when they are missing and returns the
// registry. The caller opens db with its driver and keeps it open; Close
// on db stops the registry.
func NewSQL(ctx context.Context, db *sql.DB, d sqlstore.Dialect, opts ...Option) (*SQL, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("acemq: schemas.NewSQL needs a *sql.DB; open one with your driver first")
	}
	s := &SQL{db: db, d: d, cfg: newConfig(opts)}
	// MySQL: InnoDB for the row lock on the sequence, utf8mb4 so any
	// subject and definition round-trips, binary collation so subjects
	// compare byte for byte as on the other dialects.
	table := ""
	if d == sqlstore.MySQL {
		table = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
	}
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS acemq_schemas (
			id BIGINT NOT NULL PRIMARY KEY,
			subject VARCHAR(255) NOT NULL,
			version INTEGER NOT NULL,
			format VARCHAR(32) NOT NULL,
			definition TEXT NOT NULL,
			fingerprint CHAR(64) NOT NULL,
			registered_at BIGINT NOT NULL,
			UNIQUE (subject, fingerprint),
			UNIQUE (subject, version))` + table,
		`CREATE TABLE IF NOT EXISTS acemq_schemas_seq (
			name VARCHAR(32) NOT NULL PRIMARY KEY,
			next_id BIGINT NOT NULL)` + table,
	}
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("acemq: cannot create the schema registry tables on %s: %w", d, err)
		}
	}
	if _, err := db.ExecContext(ctx, d.Rebind(`INSERT INTO acemq_schemas_seq (name, next_id) VALUES (?, 1)`), seqName); err != nil && !sqlstore.IsUniqueViolation(err) {
		return nil, fmt.Errorf("acemq: cannot create the schema registry's id sequence on %s: %w", d, err)
	}
	return s, nil
}

const columns = `id, subject, version, format, definition, fingerprint, registered_at`

func (s *SQL) one(ctx context.Context, q sqlstore.Querier, where string, args ...any) (Schema, bool, error) {
	list, err := s.many(ctx, q, where+` ORDER BY version DESC`, args...)
	if err != nil || len(list) == 0 {
		return Schema{}, false, err
	}
	return list[0], true, nil
}

func (s *SQL) many(ctx context.Context, q sqlstore.Querier, where string, args ...any) ([]Schema, error) {
	rows, err := q.QueryContext(ctx, s.d.Rebind(`SELECT `+columns+` FROM acemq_schemas WHERE `+where), args...)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot read the schema registry: %w", err)
	}
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "id", "subject", "version", "format", "definition", "fingerprint", "registered_at")
	if err != nil {
		return nil, err
	}
	var out []Schema
	for rows.Next() {
		var id, at int64
		var sc Schema
		if err := sqlstore.ScanNamed(rows, idx, map[string]any{"id": &id, "subject": &sc.Subject, "version": &sc.Version,
			"format": &sc.Format, "definition": &sc.Definition, "fingerprint": &sc.Fingerprint, "registered_at": &at}); err != nil {
			return nil, fmt.Errorf("acemq: cannot read the schema registry: %w", err)
		}
		sc.ID, sc.RegisteredAt = uint32(id), time.UnixMilli(at).UTC()
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("acemq: cannot read the schema registry: %w", err)
	}
	return out, nil
}

// Register implements Registry. The sequence row is locked for the
// registration, so concurrent registrations are serialised.
func (s *SQL) Register(ctx context.Context, subject, format, definition string) (Schema, error) {
	fp := Fingerprint(definition)
	if got, ok, err := s.one(ctx, s.db, `subject = ? AND fingerprint = ?`, subject, fp); err != nil || ok {
		return got, err
	}
	if err := s.cfg.check(subject, format, definition, nil); err != nil {
		return Schema{}, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Schema{}, fmt.Errorf("acemq: cannot register a schema: %w", err)
	}
	defer tx.Rollback()
	id, err := s.take(ctx, tx)
	if err != nil {
		return Schema{}, err
	}
	if got, ok, err := s.one(ctx, tx, `subject = ? AND fingerprint = ?`, subject, fp); err != nil || ok {
		return got, err // registered by another process while this one waited for the lock
	}
	latest, ok, err := s.one(ctx, tx, `subject = ?`, subject)
	if err != nil {
		return Schema{}, err
	}
	sc := Schema{ID: id, Subject: subject, Version: 1, Format: format, Definition: definition, Fingerprint: fp,
		RegisteredAt: s.cfg.now().UTC().Truncate(time.Millisecond)}
	if ok {
		if err := s.cfg.check(subject, format, definition, &latest); err != nil {
			return Schema{}, err
		}
		sc.Version = latest.Version + 1
	}
	if err := s.insert(ctx, tx, sc); err != nil {
		return Schema{}, err
	}
	if err := tx.Commit(); err != nil {
		return Schema{}, fmt.Errorf("acemq: cannot register a schema: %w", err)
	}
	return sc, nil
}

// take advances the locked sequence row past ids already used (by Import)
// and returns the id to use.
func (s *SQL) take(ctx context.Context, tx *sql.Tx) (uint32, error) {
	if _, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE acemq_schemas_seq SET next_id = next_id + 1 WHERE name = ?`), seqName); err != nil {
		return 0, fmt.Errorf("acemq: cannot take a schema id: %w", err)
	}
	var next int64
	if err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT next_id FROM acemq_schemas_seq WHERE name = ?`), seqName).Scan(&next); err != nil {
		return 0, fmt.Errorf("acemq: cannot take a schema id: %w", err)
	}
	id := next - 1
	var maxID sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM acemq_schemas`).Scan(&maxID); err != nil {
		return 0, fmt.Errorf("acemq: cannot take a schema id: %w", err)
	}
	if maxID.Valid && maxID.Int64 >= id {
		id = maxID.Int64 + 1
		if _, err := tx.ExecContext(ctx, s.d.Rebind(`UPDATE acemq_schemas_seq SET next_id = ? WHERE name = ?`), id+1, seqName); err != nil {
			return 0, fmt.Errorf("acemq: cannot take a schema id: %w", err)
		}
	}
	if id > 0xFFFFFFFF {
		return 0, errors.New("acemq: the schema registry has used every 32-bit id")
	}
	return uint32(id), nil
}

func (s *SQL) insert(ctx context.Context, tx *sql.Tx, sc Schema) error {
	_, err := tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO acemq_schemas (`+columns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		int64(sc.ID), sc.Subject, sc.Version, sc.Format, sc.Definition, sc.Fingerprint, sc.RegisteredAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("acemq: cannot register schema %d (subject %q version %d): %w", sc.ID, sc.Subject, sc.Version, err)
	}
	return nil
}

// Import records sc under the id and version another registry gave it, as
// Memory.Import does. Importing what is already there is a no-op.
func (s *SQL) Import(ctx context.Context, sc Schema) error {
	if sc.ID == 0 || sc.Version < 1 {
		return fmt.Errorf("acemq: cannot import schema %d version %d: ids and versions start at 1", sc.ID, sc.Version)
	}
	if err := s.cfg.check(sc.Subject, sc.Format, sc.Definition, nil); err != nil {
		return err
	}
	sc.Fingerprint = Fingerprint(sc.Definition)
	if sc.RegisteredAt.IsZero() {
		sc.RegisteredAt = s.cfg.now().UTC()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("acemq: cannot import a schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := s.take(ctx, tx); err != nil { // holds the sequence lock
		return err
	}
	if old, ok, err := s.one(ctx, tx, `id = ?`, int64(sc.ID)); err != nil {
		return err
	} else if ok {
		if old.Fingerprint == sc.Fingerprint && old.Subject == sc.Subject && old.Version == sc.Version {
			return nil
		}
		return fmt.Errorf("acemq: cannot import schema id %d: the registry already holds a different schema under it", sc.ID)
	}
	if err := s.insert(ctx, tx, sc); err != nil {
		return err
	}
	return tx.Commit()
}

// ByID implements Registry.
func (s *SQL) ByID(ctx context.Context, id uint32) (Schema, error) {
	sc, ok, err := s.one(ctx, s.db, `id = ?`, int64(id))
	if err != nil {
		return Schema{}, err
	}
	if !ok {
		return Schema{}, notFoundID(id)
	}
	return sc, nil
}

// Latest implements Registry.
func (s *SQL) Latest(ctx context.Context, subject string) (Schema, error) {
	sc, ok, err := s.one(ctx, s.db, `subject = ?`, subject)
	if err != nil {
		return Schema{}, err
	}
	if !ok {
		return Schema{}, notFoundSubject(subject)
	}
	return sc, nil
}

// Versions implements Registry.
func (s *SQL) Versions(ctx context.Context, subject string) ([]Schema, error) {
	list, err := s.many(ctx, s.db, `subject = ? ORDER BY version`, subject)
	if list == nil && err == nil {
		list = []Schema{}
	}
	return list, err
}
