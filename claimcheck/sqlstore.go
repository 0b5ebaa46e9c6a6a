package claimcheck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/claimcheck/internal/mysqltable"
	"github.com/acemq-go/acemq/sqlstore"
)

// SQLStore keeps payloads in the acemq_claimcheck table of a SQL database
// (PostgreSQL, SQLite or MySQL), so a service that already has a database
// needs nothing new. Keys are bound as text; a payload is one row, written
// in one statement. On MySQL a payload must fit the server's
// max_allowed_packet (MariaDB's default is 16 MiB). Safe for concurrent
// use, across processes sharing the database.
type SQLStore struct {
	db      *sql.DB
	dialect sqlstore.Dialect
	now     func() time.Time
}

// NewSQLStore returns the store over db. It does not touch the database;
// call EnsureSchema once.
func NewSQLStore(db *sql.DB, dialect sqlstore.Dialect) (*SQLStore, error) {
	if db == nil {
		return nil, errors.New("acemq: claimcheck.NewSQLStore needs a *sql.DB")
	}
	if err := dialect.Validate(); err != nil {
		return nil, err
	}
	return &SQLStore{db: db, dialect: dialect, now: time.Now}, nil
}

// mysqlSchema: keys are VARBINARY so they compare byte for byte, the
// engine is InnoDB whatever the server's default.
const mysqlSchema = `CREATE TABLE IF NOT EXISTS acemq_claimcheck (
  claim_key VARBINARY(255) PRIMARY KEY,
  payload LONGBLOB NOT NULL,
  stored_at BIGINT NOT NULL,
  INDEX acemq_claimcheck_stored (stored_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

var mysqlColumns = []mysqltable.Column{
	{Name: "claim_key", Type: "varbinary", Definition: "VARBINARY(255) NOT NULL", Why: "compared byte for byte, so keys differing in case stay two keys"},
}

// Schema returns the statements EnsureSchema runs for dialect.
func Schema(dialect sqlstore.Dialect) []string {
	if dialect == sqlstore.MySQL {
		return []string{mysqlSchema}
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS acemq_claimcheck (
  claim_key VARCHAR(255) PRIMARY KEY,
  payload ` + dialect.BlobType() + ` NOT NULL,
  stored_at BIGINT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS acemq_claimcheck_stored ON acemq_claimcheck (stored_at)`,
	}
}

// EnsureSchema creates the table and its index if missing. Idempotent. On
// MySQL it also checks a table that was there already and fails with the
// ALTER TABLE that fixes it.
func (s *SQLStore) EnsureSchema(ctx context.Context) error {
	for _, stmt := range Schema(s.dialect) {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the claim-check table: %w", err)
		}
	}
	if s.dialect == sqlstore.MySQL {
		return mysqltable.Check(ctx, s.db, "acemq_claimcheck", mysqlColumns...)
	}
	return nil
}

func (s *SQLStore) q(query string) string { return s.dialect.Rebind(query) }

// Put inserts payload under a new random key.
func (s *SQLStore) Put(ctx context.Context, payload []byte) (string, error) {
	key, err := newKey()
	if err != nil {
		return "", err
	}
	if payload == nil {
		payload = []byte{}
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO acemq_claimcheck (claim_key, payload, stored_at) VALUES (?, ?, ?)`),
		key, payload, s.now().UnixMilli()); err != nil {
		return "", fmt.Errorf("acemq: cannot insert a claim-check payload: %w", err)
	}
	return key, nil
}

// Get reads the payload under key. A key longer than 255 bytes is an
// error wrapping ErrInvalidKey.
func (s *SQLStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if len(key) == 0 || len(key) > maxKey {
		return nil, false, invalidKey(key, fmt.Sprintf("is not 1 to %d bytes", maxKey))
	}
	var payload []byte
	err := s.db.QueryRowContext(ctx, s.q(`SELECT payload FROM acemq_claimcheck WHERE claim_key = ?`), key).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("acemq: cannot read claim-check payload %q: %w", key, err)
	}
	return payload, true, nil
}

// Delete deletes the row under key.
func (s *SQLStore) Delete(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM acemq_claimcheck WHERE claim_key = ?`), key); err != nil {
		return fmt.Errorf("acemq: cannot delete claim-check payload %q: %w", key, err)
	}
	return nil
}

// DeleteStoredBefore deletes the rows stored before cutoff.
func (s *SQLStore) DeleteStoredBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM acemq_claimcheck WHERE stored_at < ?`), cutoff.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot delete old claim-check payloads: %w", err)
	}
	return sqlstore.RowsAffected(res)
}
