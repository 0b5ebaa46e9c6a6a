package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq/sqlstore"
)

// advisoryKey is the PostgreSQL advisory lock key that serialises claims
// ("acemq_ob" in ASCII).
const advisoryKey int64 = 0x6163656d715f6f62

// claimSQL locks the first batch of unretired records for relay only when
// no record carries another relay's unexpired lock (PostgreSQL, SQLite).
const claimSQL = `UPDATE acemq_outbox SET locked_by = ?, locked_until = ?
WHERE seq IN (SELECT seq FROM acemq_outbox WHERE attempts < ? ORDER BY seq LIMIT ?)
AND NOT EXISTS (SELECT 1 FROM acemq_outbox WHERE locked_by IS NOT NULL AND locked_by <> ? AND locked_until > ?)`

// claim locks the next batch for relay and returns it in sequence order;
// nil when there is nothing to do or another relay holds the outbox.
func (s *Store) claim(ctx context.Context, relay string, batch int, ttl time.Duration) ([]Record, error) {
	now := s.now()
	args := []any{relay, now.Add(ttl).UnixMilli(), MaxAttempts, batch, relay, now.UnixMilli()}
	var n int64
	var err error
	switch s.dialect {
	case sqlstore.PostgreSQL:
		n, err = s.claimPostgres(ctx, args)
	case sqlstore.MySQL:
		n, err = s.claimMySQL(ctx, relay, batch, now, ttl)
	default:
		n, err = s.exec(ctx, s.db, claimSQL, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot claim outbox records: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	recs, err := s.query(ctx, s.db, `SELECT `+recordColumns+` FROM acemq_outbox WHERE locked_by = ? AND attempts < ? ORDER BY seq LIMIT `+fmt.Sprint(batch), relay, MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot read claimed outbox records: %w", err)
	}
	return recs, nil
}

func (s *Store) exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, err
	}
	return sqlstore.RowsAffected(res)
}

// claimPostgres runs the claim after a transaction-scoped advisory lock:
// under READ COMMITTED the UPDATE then sees every claim committed before
// it, so two relays never both find "no other lock".
func (s *Store) claimPostgres(ctx context.Context, args []any) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey); err != nil {
		return 0, err
	}
	n, err := s.exec(ctx, tx, claimSQL, args...)
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// mysqlLockName is the GET_LOCK name that serialises claims: one per
// database, as PostgreSQL's advisory locks are (GET_LOCK names are
// server-wide), cut to the 64 characters MySQL allows. Two databases whose
// names share their first 51 characters share a lock, which costs only
// waiting.
const mysqlLockName = `LEFT(CONCAT('acemq_outbox.', COALESCE(DATABASE(), '')), 64)`

// claimMySQL runs the claim under a named lock held by one session. It
// reads with plain (consistent) SELECTs and then changes the chosen rows
// by primary key: an InnoDB UPDATE that scans the table locks every row it
// reads, so claimSQL would wait for each open transaction that called Add
// (until it commits) and hold up new Adds meanwhile. The named lock makes
// the reads and the UPDATE one step for other relays.
func (s *Store) claimMySQL(ctx context.Context, relay string, batch int, now time.Time, ttl time.Duration) (int64, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(`+mysqlLockName+`, 30)`).Scan(&got); err != nil {
		return 0, err
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("another relay on this database held the claim lock for 30s; the next sweep tries again")
	}
	defer c.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(`+mysqlLockName+`)`) //nolint:errcheck // closing the session releases it too
	var others bool
	if err := c.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM acemq_outbox WHERE locked_by IS NOT NULL AND locked_by <> ? AND locked_until > ?)`, relay, now.UnixMilli()).Scan(&others); err != nil {
		return 0, err
	}
	if others {
		return 0, nil
	}
	ids, err := sqlstore.Column(ctx, c, `SELECT id FROM acemq_outbox WHERE attempts < ? ORDER BY seq LIMIT ?`, MaxAttempts, batch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	args := append([]any{relay, now.Add(ttl).UnixMilli(), MaxAttempts}, ids...)
	return s.exec(ctx, c, `UPDATE acemq_outbox SET locked_by = ?, locked_until = ? WHERE attempts < ? AND id IN (`+sqlstore.List(len(ids))+`)`, args...)
}

// markPublished deletes a confirmed record.
func (s *Store) markPublished(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.q(`DELETE FROM acemq_outbox WHERE id = ?`), id)
	return err
}

// markFailed spends one attempt on a record and keeps the reason.
func (s *Store) markFailed(ctx context.Context, id string, reason string) error {
	_, err := s.db.ExecContext(ctx, s.q(`UPDATE acemq_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?`), truncate(reason, 1000), id)
	return err
}

// unlock drops relay's locks (a relay that stops hands over at once). On
// MySQL it finds them with a plain SELECT and unlocks by primary key, for
// the reason claimMySQL gives.
func (s *Store) unlock(ctx context.Context, relay string) error {
	const unlockSQL = `UPDATE acemq_outbox SET locked_by = NULL, locked_until = NULL WHERE locked_by = ?`
	if s.dialect != sqlstore.MySQL {
		_, err := s.db.ExecContext(ctx, s.q(unlockSQL), relay)
		return err
	}
	ids, err := sqlstore.Column(ctx, s.db, `SELECT id FROM acemq_outbox WHERE locked_by = ?`, relay)
	if err != nil || len(ids) == 0 {
		return err
	}
	_, err = s.db.ExecContext(ctx, unlockSQL+` AND id IN (`+sqlstore.List(len(ids))+`)`, append([]any{relay}, ids...)...)
	return err
}

// truncate keeps at most n characters of s.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
