package stream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/stream/internal/mysqltable"
)

// SQLCheckpoints is a CheckpointStore in the acemq_stream_checkpoint table
// of a SQL database (PostgreSQL, SQLite or MySQL): one row per stream and
// reader, replaced by each save in one statement. Names are bound as text
// and, on MySQL, compared byte for byte. Safe for concurrent use, across
// processes sharing the database.
type SQLCheckpoints struct {
	db      *sql.DB
	dialect sqlstore.Dialect
}

// NewSQLCheckpoints returns the store over db. It does not touch the
// database; call EnsureSchema once. It fails for a nil db or an unknown
// dialect.
func NewSQLCheckpoints(db *sql.DB, dialect sqlstore.Dialect) (*SQLCheckpoints, error) {
	if db == nil {
		return nil, errors.New("acemq: stream.NewSQLCheckpoints needs a *sql.DB")
	}
	if err := dialect.Validate(); err != nil {
		return nil, err
	}
	return &SQLCheckpoints{db: db, dialect: dialect}, nil
}

// CheckpointSchema returns the statements EnsureSchema runs for dialect.
func CheckpointSchema(dialect sqlstore.Dialect) []string {
	name, tail := "VARCHAR(255)", ""
	if dialect == sqlstore.MySQL {
		name, tail = "VARBINARY(255)", " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
	}
	return []string{`CREATE TABLE IF NOT EXISTS acemq_stream_checkpoint (
  stream_name ` + name + ` NOT NULL,
  reader_name ` + name + ` NOT NULL,
  last_offset BIGINT NOT NULL,
  saved_at BIGINT NOT NULL,
  PRIMARY KEY (stream_name, reader_name)
)` + tail}
}

var mysqlCheckpointColumns = []mysqltable.Column{
	{Name: "stream_name", Type: "varbinary", Definition: "VARBINARY(255) NOT NULL", Why: "stream names are compared byte for byte"},
	{Name: "reader_name", Type: "varbinary", Definition: "VARBINARY(255) NOT NULL", Why: "reader names are compared byte for byte"},
}

// EnsureSchema creates the table if missing. Idempotent. On MySQL it also
// checks a table that was there already and fails with the ALTER TABLE
// that fixes it.
func (s *SQLCheckpoints) EnsureSchema(ctx context.Context) error {
	for _, stmt := range CheckpointSchema(s.dialect) {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the stream checkpoint table: %w", err)
		}
	}
	if s.dialect == sqlstore.MySQL {
		return mysqltable.Check(ctx, s.db, "acemq_stream_checkpoint", mysqlCheckpointColumns...)
	}
	return nil
}

// Load reads the reader's saved offset.
func (s *SQLCheckpoints) Load(ctx context.Context, stream, reader string) (int64, bool, error) {
	rows, err := s.db.QueryContext(ctx, s.dialect.Rebind(`SELECT last_offset FROM acemq_stream_checkpoint WHERE stream_name = ? AND reader_name = ?`), stream, reader)
	if err != nil {
		return 0, false, fmt.Errorf("acemq: cannot read the checkpoint of stream reader %q on %q; check the database, and that EnsureSchema created acemq_stream_checkpoint: %w", reader, stream, err)
	}
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "last_offset")
	if err != nil {
		return 0, false, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, false, fmt.Errorf("acemq: cannot read the checkpoint of stream reader %q on %q: %w", reader, stream, err)
		}
		return 0, false, nil
	}
	var off int64
	if err := sqlstore.ScanNamed(rows, idx, map[string]any{"last_offset": &off}); err != nil {
		return 0, false, fmt.Errorf("acemq: cannot read the checkpoint of stream reader %q on %q: %w", reader, stream, err)
	}
	return off, true, nil
}

// Save replaces the reader's saved offset in one statement (an upsert).
func (s *SQLCheckpoints) Save(ctx context.Context, stream, reader string, offset int64) error {
	q := `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at) VALUES (?, ?, ?, ?)
ON CONFLICT (stream_name, reader_name) DO UPDATE SET last_offset = excluded.last_offset, saved_at = excluded.saved_at`
	if s.dialect == sqlstore.MySQL {
		q = `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE last_offset = VALUES(last_offset), saved_at = VALUES(saved_at)`
	}
	if _, err := s.db.ExecContext(ctx, s.dialect.Rebind(q), stream, reader, offset, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("acemq: cannot save the checkpoint of stream reader %q on %q at offset %d: %w", reader, stream, offset, err)
	}
	return nil
}
