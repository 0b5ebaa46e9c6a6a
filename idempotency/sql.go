package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/idempotency/internal/mysqltable"
	"github.com/acemq-go/acemq/sqlstore"
)

// SQLStore is a Store in the acemq_idempotency table of a SQL database
// (PostgreSQL, SQLite, MySQL). Keys are bound as text and rows read by
// column name; only a real unique violation means "already there". Safe
// for concurrent use, across processes sharing the database.
//
// Times (a claim's lease, a confirmed key's retention) are written and
// compared on the database's clock, the one clock every process sharing
// the table agrees on.
type SQLStore struct {
	db      *sql.DB
	dialect sqlstore.Dialect
	// now, when set, is the clock times are written and compared at
	// (tests); nil: the database's.
	now       func() time.Time
	retention time.Duration
}

// NewSQLStore returns the store over db (WithRetention sets how long a
// confirmed key is kept). It does not touch the database; call
// EnsureSchema once.
func NewSQLStore(db *sql.DB, dialect sqlstore.Dialect, opts ...StoreOption) (*SQLStore, error) {
	if db == nil {
		return nil, errors.New("acemq: idempotency.NewSQLStore needs a *sql.DB")
	}
	if err := dialect.Validate(); err != nil {
		return nil, err
	}
	return &SQLStore{db: db, dialect: dialect, retention: newStoreOptions(opts).retention}, nil
}

// nowSQL is the SQL for the current time in epoch ms: the argument nowArg
// gives, or the database's clock when that is NULL.
func nowSQL(d sqlstore.Dialect) string {
	cast := "BIGINT"
	if d == sqlstore.MySQL {
		cast = "SIGNED"
	}
	return "COALESCE(CAST(? AS " + cast + "), " + d.NowMillis() + ")"
}

// nowArg is nowSQL's argument: nil (the database's clock), or the test's
// clock in epoch ms.
func (s *SQLStore) nowArg() any {
	if s.now == nil {
		return nil
	}
	return s.now().UnixMilli()
}

// mysqlSchema is the table on MySQL. Keys and tokens are VARBINARY,
// compared byte for byte: the default collations compare text without
// case and trailing spaces, which made "order-1" a duplicate of "Order-1"
// and so never ran it. 1020 bytes hold the 255 characters VARCHAR(255)
// holds elsewhere. Text is utf8mb4 whatever the server's default, and the
// engine InnoDB whatever the default: MyISAM has no transactions.
const mysqlSchema = `CREATE TABLE IF NOT EXISTS acemq_idempotency (
  message_id VARBINARY(1020) PRIMARY KEY,
  state VARCHAR(16) NOT NULL,
  claimed_by VARBINARY(64),
  recorded_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  INDEX acemq_idempotency_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// mysqlColumns are the column types mysqltable.Check insists on.
var mysqlColumns = []mysqltable.Column{
	{Name: "message_id", Type: "varbinary", Definition: "VARBINARY(1020) NOT NULL", Why: "compared byte for byte, or keys differing in case are taken for one and the second message never runs"},
	{Name: "claimed_by", Type: "varbinary", Definition: "VARBINARY(64)", Why: "claim tokens are compared byte for byte"},
}

// Schema returns the statements EnsureSchema runs for dialect.
func Schema(dialect sqlstore.Dialect) []string {
	cols := `message_id VARCHAR(255) PRIMARY KEY,
  state VARCHAR(16) NOT NULL,
  claimed_by VARCHAR(64),
  recorded_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL`
	if dialect == sqlstore.MySQL {
		return []string{mysqlSchema}
	}
	return []string{`CREATE TABLE IF NOT EXISTS acemq_idempotency (` + cols + `)`,
		`CREATE INDEX IF NOT EXISTS acemq_idempotency_expires ON acemq_idempotency (expires_at)`}
}

// EnsureSchema creates the table and its index if missing. Idempotent. On
// MySQL it also checks a table that was there already, and fails with the
// ALTER TABLE that fixes it when the table is not InnoDB, compares keys
// without case, or keeps text in another character set than utf8mb4.
func (s *SQLStore) EnsureSchema(ctx context.Context) error {
	return ensureSchema(ctx, s.db, s.dialect)
}

func ensureSchema(ctx context.Context, db *sql.DB, d sqlstore.Dialect) error {
	for _, stmt := range Schema(d) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the idempotency table: %w", err)
		}
	}
	if d == sqlstore.MySQL {
		return mysqltable.Check(ctx, db, "acemq_idempotency", mysqlColumns...)
	}
	return nil
}

func (s *SQLStore) q(query string) string { return s.dialect.Rebind(query) }

// maxKeyChars is the longest key the message_id column is for:
// VARCHAR(255), or on MySQL VARBINARY(1020), 255 characters of up to four
// bytes.
const maxKeyChars = 255

// checkKey refuses, on MySQL, a key longer than maxKeyChars: a server that
// is not in strict mode cuts a value too long for its column and goes on,
// so two long keys sharing a prefix would be one key and the second
// message would never run. The error is fatal: retrying cannot shorten
// the key.
func checkKey(d sqlstore.Dialect, key string) error {
	if d != sqlstore.MySQL {
		return nil
	}
	n := utf8.RuneCountInString(key)
	if n <= maxKeyChars {
		return nil
	}
	return acemq.Fatal(fmt.Errorf("acemq: idempotency key %.40q... is %d characters, and the acemq_idempotency table holds keys of up to %d characters; derive a shorter key with WithKey (a hash, say)", key, n, maxKeyChars))
}

// Claim implements Store with the spec's algorithm: insert-if-absent; on a
// unique violation take over an expired claim, or a confirmed key whose
// retention ended (UPDATE … WHERE expires_at < now; one row → claimed);
// else read the row: confirmed → duplicate, claimed → in progress. A driver that cannot
// report rows affected makes Claim fail. On MySQL a key longer than 255
// characters fails as acemq.Fatal (see checkKey).
func (s *SQLStore) Claim(ctx context.Context, key string, lease time.Duration) (Claim, error) {
	if err := checkKey(s.dialect, key); err != nil {
		return Claim{}, err
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	now, at := nowSQL(s.dialect), s.nowArg()
	for range 3 {
		tok := newToken()
		_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO acemq_idempotency (message_id, state, claimed_by, recorded_at, expires_at) VALUES (?, 'claimed', ?, `+now+`, `+now+` + ?)`),
			key, tok, at, at, lease.Milliseconds())
		if err == nil {
			return Claim{Outcome: Claimed, Token: tok}, nil
		}
		if !sqlstore.IsUniqueViolation(err) {
			return Claim{}, fmt.Errorf("acemq: cannot claim idempotency key %q: %w", key, err)
		}
		// An expired claim (its worker died), or a confirmed key whose
		// retention ended (forgotten: the message runs again).
		res, err := s.db.ExecContext(ctx, s.q(`UPDATE acemq_idempotency SET state = 'claimed', claimed_by = ?, recorded_at = `+now+`, expires_at = `+now+` + ? WHERE message_id = ? AND expires_at < `+now),
			tok, at, at, lease.Milliseconds(), key, at)
		if err != nil {
			return Claim{}, fmt.Errorf("acemq: cannot take over idempotency key %q: %w", key, err)
		}
		n, err := sqlstore.RowsAffected(res)
		if err != nil {
			return Claim{}, err
		}
		if n == 1 {
			return Claim{Outcome: Claimed, Token: tok}, nil
		}
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT message_id, state, expires_at FROM acemq_idempotency WHERE message_id = ?`), key)
		if err != nil {
			return Claim{}, fmt.Errorf("acemq: cannot read idempotency key %q: %w", key, err)
		}
		state, found, err := readState(rows)
		if err != nil {
			return Claim{}, fmt.Errorf("acemq: cannot read idempotency key %q: %w", key, err)
		}
		if !found {
			continue // released between the insert and the read: try again
		}
		switch state {
		case "confirmed":
			return Claim{Outcome: Duplicate}, nil
		case "claimed":
			return Claim{Outcome: InProgress}, nil
		}
		return Claim{}, fmt.Errorf("acemq: idempotency key %q has unknown state %q", key, state)
	}
	return Claim{}, fmt.Errorf("acemq: idempotency key %q kept changing while being claimed; try again", key)
}

func readState(rows *sql.Rows) (string, bool, error) {
	defer rows.Close()
	idx, err := sqlstore.Columns(rows, "state")
	if err != nil {
		return "", false, err
	}
	if !rows.Next() {
		return "", false, rows.Err()
	}
	var state string
	if err := sqlstore.ScanNamed(rows, idx, map[string]any{"state": &state}); err != nil {
		return "", false, err
	}
	return state, true, rows.Err()
}

// Confirm implements Store.
func (s *SQLStore) Confirm(ctx context.Context, key, token string) error {
	now, at := nowSQL(s.dialect), s.nowArg()
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE acemq_idempotency SET state = 'confirmed', recorded_at = `+now+`, expires_at = `+now+` + ? WHERE message_id = ? AND state = 'claimed' AND claimed_by = ?`),
		at, at, s.retention.Milliseconds(), key, token)
	if err != nil {
		return fmt.Errorf("acemq: cannot confirm idempotency key %q: %w", key, err)
	}
	n, err := sqlstore.RowsAffected(res)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%w (key %q)", ErrClaimLost, key)
	}
	return nil
}

// Release implements Store.
func (s *SQLStore) Release(ctx context.Context, key, token string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM acemq_idempotency WHERE message_id = ? AND state = 'claimed' AND claimed_by = ?`), key, token); err != nil {
		return fmt.Errorf("acemq: cannot release idempotency key %q: %w", key, err)
	}
	return nil
}

// Prune implements Store: it removes the keys whose window (a confirmed
// key's retention, a claim's lease) ended before olderThan and before now.
// On MySQL it finds the rows with a plain SELECT
// and deletes them by primary key, 500 at a time: an InnoDB DELETE that
// scans the table locks every row it reads, so it would wait for each
// running Transactional handler (until its transaction ends) and hold up
// every new key's insert meanwhile.
func (s *SQLStore) Prune(ctx context.Context, olderThan time.Time) (int, error) {
	prunable := `(expires_at < ` + nowSQL(s.dialect) + ` AND expires_at < ?)`
	prune := `DELETE FROM acemq_idempotency WHERE ` + prunable
	at, cut := s.nowArg(), olderThan.UnixMilli()
	if s.dialect != sqlstore.MySQL {
		res, err := s.db.ExecContext(ctx, s.q(prune), at, cut)
		if err != nil {
			return 0, fmt.Errorf("acemq: cannot prune idempotency keys: %w", err)
		}
		n, err := sqlstore.RowsAffected(res)
		return int(n), err
	}
	total := 0
	for {
		keys, err := sqlstore.Column(ctx, s.db, `SELECT message_id FROM acemq_idempotency WHERE `+prunable+` LIMIT 500`, at, cut)
		if err != nil {
			return total, fmt.Errorf("acemq: cannot prune idempotency keys: %w", err)
		}
		if len(keys) == 0 {
			return total, nil
		}
		res, err := s.db.ExecContext(ctx, prune+` AND message_id IN (`+sqlstore.List(len(keys))+`)`, append([]any{at, cut}, keys...)...)
		if err != nil {
			return total, fmt.Errorf("acemq: cannot prune idempotency keys: %w", err)
		}
		n, err := sqlstore.RowsAffected(res)
		if err != nil {
			return total, err
		}
		total += int(n)
		if n == 0 {
			return total, nil // every key read changed since: nothing left that this pass can take
		}
	}
}
