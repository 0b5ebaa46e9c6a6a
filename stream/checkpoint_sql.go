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

// SQLCheckpoints is a FencedCheckpointStore in the acemq_stream_checkpoint
// table of a SQL database (PostgreSQL, SQLite or MySQL): one row per
// stream and reader, moved forward by each save in one statement (never
// backwards), and naming the reader that holds it (holder). Names are
// bound as text and, on MySQL, compared byte for byte. Safe for
// concurrent use, across processes sharing the database.
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
// A row whose last_offset is -1 was claimed and never saved.
func CheckpointSchema(dialect sqlstore.Dialect) []string {
	name, holder, tail := "VARCHAR(255)", "VARCHAR(64)", ""
	if dialect == sqlstore.MySQL {
		name, holder, tail = "VARBINARY(255)", "VARBINARY(64)", " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
	}
	return []string{`CREATE TABLE IF NOT EXISTS acemq_stream_checkpoint (
  stream_name ` + name + ` NOT NULL,
  reader_name ` + name + ` NOT NULL,
  last_offset BIGINT NOT NULL,
  saved_at BIGINT NOT NULL,
  holder ` + holder + `,
  PRIMARY KEY (stream_name, reader_name)
)` + tail}
}

var mysqlCheckpointColumns = []mysqltable.Column{
	{Name: "stream_name", Type: "varbinary", Definition: "VARBINARY(255) NOT NULL", Why: "stream names are compared byte for byte"},
	{Name: "reader_name", Type: "varbinary", Definition: "VARBINARY(255) NOT NULL", Why: "reader names are compared byte for byte"},
	{Name: "holder", Type: "varbinary", Definition: "VARBINARY(64)", Why: "holders are compared byte for byte (fencing)"},
}

// EnsureSchema creates the table if missing, and adds the holder column
// to a table made by an earlier version. Idempotent. On MySQL it also
// checks a table that was there already and fails with the ALTER TABLE
// that fixes it.
func (s *SQLCheckpoints) EnsureSchema(ctx context.Context) error {
	for _, stmt := range CheckpointSchema(s.dialect) {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the stream checkpoint table: %w", err)
		}
	}
	if err := s.addHolder(ctx); err != nil {
		return err
	}
	if s.dialect == sqlstore.MySQL {
		return mysqltable.Check(ctx, s.db, "acemq_stream_checkpoint", mysqlCheckpointColumns...)
	}
	return nil
}

// addHolder adds the holder column to a table made before it existed.
func (s *SQLCheckpoints) addHolder(ctx context.Context) error {
	if s.hasHolder(ctx) {
		return nil
	}
	typ := "VARCHAR(64)"
	if s.dialect == sqlstore.MySQL {
		typ = "VARBINARY(64)"
	}
	if _, err := s.db.ExecContext(ctx, `ALTER TABLE acemq_stream_checkpoint ADD COLUMN holder `+typ); err != nil && !s.hasHolder(ctx) {
		return fmt.Errorf("acemq: cannot add the holder column to the stream checkpoint table: %w", err)
	}
	return nil // added, or added by a concurrent EnsureSchema
}

// hasHolder reports whether the table has the holder column.
func (s *SQLCheckpoints) hasHolder(ctx context.Context) bool {
	_, err := s.db.ExecContext(ctx, `SELECT holder FROM acemq_stream_checkpoint WHERE 1 = 0`)
	return err == nil
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
	return off, off >= 0, nil
}

// Claim implements FencedCheckpointStore: it makes holder the name's
// reader (creating the row, offset -1, when there is none) and reads the
// saved offset.
func (s *SQLCheckpoints) Claim(ctx context.Context, stream, reader, holder string) (int64, bool, error) {
	q := `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at, holder) VALUES (?, ?, -1, ?, ?)
ON CONFLICT (stream_name, reader_name) DO UPDATE SET holder = excluded.holder`
	if s.dialect == sqlstore.MySQL {
		q = `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at, holder) VALUES (?, ?, -1, ?, ?)
ON DUPLICATE KEY UPDATE holder = VALUES(holder)`
	}
	if _, err := s.db.ExecContext(ctx, s.dialect.Rebind(q), stream, reader, time.Now().UnixMilli(), holder); err != nil {
		return 0, false, fmt.Errorf("acemq: cannot claim the checkpoint of stream reader %q on %q; check the database, and that EnsureSchema created acemq_stream_checkpoint: %w", reader, stream, err)
	}
	return s.Load(ctx, stream, reader)
}

// Save moves the reader's saved offset forward to offset in one
// statement (an upsert that changes nothing when the saved offset is not
// below offset).
func (s *SQLCheckpoints) Save(ctx context.Context, stream, reader string, offset int64) error {
	q := `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at) VALUES (?, ?, ?, ?)
ON CONFLICT (stream_name, reader_name) DO UPDATE SET last_offset = excluded.last_offset, saved_at = excluded.saved_at
WHERE acemq_stream_checkpoint.last_offset < excluded.last_offset`
	if s.dialect == sqlstore.MySQL {
		q = `INSERT INTO acemq_stream_checkpoint (stream_name, reader_name, last_offset, saved_at) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE saved_at = IF(last_offset < VALUES(last_offset), VALUES(saved_at), saved_at), last_offset = GREATEST(last_offset, VALUES(last_offset))`
	}
	if _, err := s.db.ExecContext(ctx, s.dialect.Rebind(q), stream, reader, offset, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("acemq: cannot save the checkpoint of stream reader %q on %q at offset %d: %w", reader, stream, offset, err)
	}
	return nil
}

// SaveAs implements FencedCheckpointStore: Save, fenced by holder.
func (s *SQLCheckpoints) SaveAs(ctx context.Context, stream, reader, holder string, offset int64) error {
	res, err := s.db.ExecContext(ctx, s.dialect.Rebind(`UPDATE acemq_stream_checkpoint SET last_offset = ?, saved_at = ? WHERE stream_name = ? AND reader_name = ? AND holder = ? AND last_offset < ?`),
		offset, time.Now().UnixMilli(), stream, reader, holder, offset)
	if err != nil {
		return fmt.Errorf("acemq: cannot save the checkpoint of stream reader %q on %q at offset %d: %w", reader, stream, offset, err)
	}
	n, err := sqlstore.RowsAffected(res)
	if err != nil || n == 1 {
		return err
	}
	// Nothing changed: the saved offset is not below offset, or another
	// reader holds the name.
	rows, err := s.db.QueryContext(ctx, s.dialect.Rebind(`SELECT holder FROM acemq_stream_checkpoint WHERE stream_name = ? AND reader_name = ?`), stream, reader)
	if err != nil {
		return fmt.Errorf("acemq: cannot read the holder of stream reader %q's checkpoint on %q: %w", reader, stream, err)
	}
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "holder")
	if err != nil {
		return err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w (the checkpoint of %q on %q is gone)", ErrCheckpointTaken, reader, stream)
	}
	var h sql.NullString
	if err := sqlstore.ScanNamed(rows, idx, map[string]any{"holder": &h}); err != nil {
		return err
	}
	if h.String != holder {
		return fmt.Errorf("%w (%q on %q is held by %s now)", ErrCheckpointTaken, reader, stream, h.String)
	}
	return nil
}
