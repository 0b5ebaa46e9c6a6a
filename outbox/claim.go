package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq/sqlstore"
)

// pgRelayKey is the PostgreSQL advisory lock key of the relay named by the
// statement's $1: the relay's session holds it for as long as it lives.
const pgRelayKey = `hashtextextended('acemq_outbox_relay/' || %s, 0)`

// mysqlRelayLock is the GET_LOCK name of the relay named by the
// statement's ?: one per relay and database, 52 characters.
const mysqlRelayLock = `CONCAT('acemq_relay.', SHA1(CONCAT(COALESCE(DATABASE(), ''), '/', ?)))`

// claimSQL locks the first batch of unretired records for relay only when
// no record carries another relay's unexpired lock (SQLite, where the
// lease is the only sign of life). "locked_by < relay OR locked_by >
// relay" is "locked_by IS NOT NULL AND locked_by <> relay" in a form the
// planner reads from the locked_by index: the other form scanned the
// whole table on every claim.
//
// Lease times are the database's: COALESCE(?, now) reads the database's
// clock when its argument is NULL (Store.leaseAt), so relays whose clocks
// disagree still agree on whether a lease expired. %[2]s is the dialect's
// now (sqlstore.Dialect.NowMillis).
const claimSQL = `UPDATE acemq_outbox SET locked_by = ?, locked_until = COALESCE(?, %[2]s) + ?
WHERE seq IN (SELECT seq FROM acemq_outbox WHERE attempts < ? AND seq NOT IN (%[1]s) ORDER BY seq LIMIT ?)
AND NOT EXISTS (SELECT 1 FROM acemq_outbox WHERE (locked_by < ? OR locked_by > ?) AND locked_until > COALESCE(?, %[2]s))`

// errSameID is returned when another live session holds this relay's own
// lock: two relays were given one id.
var errSameID = errors.New("another running relay has the same id (its database session holds the relay's lock); give each relay its own WithRelayID")

// owner is one relay's hold on the outbox. On PostgreSQL and MySQL it is a
// database session of the relay's own that holds a lock named after the
// relay for as long as the session lives (a session-level advisory lock;
// GET_LOCK): other relays read the relay's liveness from that lock, so a
// relay whose process or connection died loses its claim at once. The
// relay's claims and writes run on that session, so every one of them
// shows the relay alive, and a relay uses one pooled connection. On
// SQLite it is the pool (the lease alone tells liveness).
type owner struct {
	s     *Store
	relay string
	ttl   time.Duration // the lease
	conn  *sql.Conn     // server dialects: nil until first use and after a failure

	pgClaim      string // pgClaimSQL written for pgClaimBatch records (PostgreSQL)
	pgClaimBatch int
}

func (s *Store) owner(relay string, ttl time.Duration) *owner {
	return &owner{s: s, relay: relay, ttl: ttl}
}

// session returns what the owner's statements run on, opening the session
// and taking the relay's lock when there is none.
func (o *owner) session(ctx context.Context) (querier, error) {
	if o.s.dialect == sqlstore.SQLite {
		return o.s.db, nil
	}
	if o.conn != nil {
		return o.conn, nil
	}
	c, err := o.s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if o.s.dialect == sqlstore.PostgreSQL {
		if err := o.ownSession(ctx, c); err != nil {
			discard(c)
			return nil, err
		}
	}
	var got sql.NullInt64
	switch o.s.dialect {
	case sqlstore.PostgreSQL:
		var ok bool
		err = c.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(`+fmt.Sprintf(pgRelayKey, "$1")+`)`, o.relay).Scan(&ok)
		if ok {
			got.Int64 = 1
		}
	default:
		err = c.QueryRowContext(ctx, `SELECT GET_LOCK(`+mysqlRelayLock+`, 0)`, o.relay).Scan(&got)
	}
	if err == nil && got.Int64 != 1 {
		err = errSameID
	}
	if err == nil && o.s.dialect == sqlstore.PostgreSQL {
		// The claim is one statement that relies on REPEATABLE READ to
		// fail rather than overlap another relay's claim (pgClaimSQL).
		// The relay's other statements are single statements too; at
		// this level one that meets a record another relay changed after
		// it began fails instead of skipping it, which the relay handles
		// as it handles a lost claim.
		//
		// Its plans never scan the table or sort: every statement the
		// relay runs reads a few records by an index (seq, id, locked_by),
		// and without statistics (a table filled since autovacuum's last
		// ANALYZE, up to a minute) PostgreSQL planned the claim as scans
		// of the whole table and a sort, and kept that plan for the
		// prepared statement: claims grew with the dead records of the
		// drain until the relay fell 16 s behind at 1,000 records/s.
		_, err = c.ExecContext(ctx, `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET enable_seqscan = off; SET enable_sort = off`)
	}
	if err == nil && o.s.dialect == sqlstore.MySQL {
		// No gap locks: the relay's fenced DELETE and UPDATE find rows by
		// locked_by, and under REPEATABLE READ their next-key locks on
		// that index stopped producers' inserts (locked_by NULL, the
		// gap before) and deadlocked their transactions.
		_, err = c.ExecContext(ctx, `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`)
	}
	if err != nil {
		discard(c)
		return nil, err
	}
	o.conn = c
	return c, nil
}

// errTransactionPooling is why a relay refuses to run behind a pooler
// that hands its statements to whichever server session is free.
var errTransactionPooling = errors.New("acemq: the outbox relay's connections reach PostgreSQL through a pooler in transaction or statement mode (PgBouncer's pool_mode = transaction, say): the relay's session-level lock, which tells other relays it is alive, and its session settings would not stay with it, so two relays could publish at once. Give the relay's *sql.DB a direct connection to PostgreSQL, or a pooler in session mode (pool_mode = session)")

// ownSession checks, before the relay takes its lock, that c is a
// PostgreSQL session of its own: another connection of the pool, asked
// while c is idle, must be on another server process. Behind a pooler in
// transaction mode the idle c's server process goes back to the pool, and
// the pooler hands it to the next client (PgBouncer reuses the server
// connection freed last first), so both answer the same pid. When no
// second connection can be had within 2 s (a pool of one), it does not
// check.
func (o *owner) ownSession(ctx context.Context, c *sql.Conn) error {
	var mine, theirs int64
	if err := c.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&mine); err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	other, err := o.s.db.Conn(octx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return nil // no second connection to be had: not checked
	}
	defer other.Close()
	if err := other.QueryRowContext(octx, `SELECT pg_backend_pid()`).Scan(&theirs); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return nil
	}
	if theirs == mine {
		return errTransactionPooling
	}
	return nil
}

// discard closes c's session instead of handing it back to the pool, so
// the locks it holds go with it.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// fail drops the session after a failed statement: it may be broken, and
// a new one takes the relay's lock again. It returns err.
func (o *owner) fail(err error) error {
	if err != nil && o.conn != nil {
		discard(o.conn)
		o.conn = nil
	}
	return err
}

// close ends the owner's session; its relay lock goes with it.
func (o *owner) close() {
	if o.conn != nil {
		discard(o.conn)
		o.conn = nil
	}
}

// claim locks the next batch for the relay and returns it in sequence
// order; nil when there is nothing to do or another live relay holds the
// outbox. Another relay's unexpired lock holds the outbox while that
// relay's session lives (PostgreSQL, MySQL); a lock whose session is gone
// is taken over at once.
//
// skip lists records (by seq) the claim passes over: the batch the relay
// is publishing while it claims its next one (their locks are the relay's
// own, so they never hold it up). The next batch is the first unretired
// records but those, so a record that became visible late with a lower
// seq (its transaction committed after later ones) is not passed over.
//
// done (PostgreSQL only; nil elsewhere) lists the relay's confirmed
// records (by seq) to delete in the claim's own transaction, fenced as
// published fences; claim then returns how many of them it deleted, and
// claims nothing unless it deleted them all (the records after them must
// not go out before they are gone).
func (o *owner) claim(ctx context.Context, batch int, skip, done []int64) ([]Record, int64, error) {
	if len(skip) == 0 {
		skip = []int64{-1} // seq is never negative; an empty list is no SQL
	}
	q, err := o.session(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("acemq: cannot claim outbox records: %w", err)
	}
	if len(done) > 0 && o.s.dialect != sqlstore.PostgreSQL {
		return nil, 0, errors.New("acemq: the outbox claim deletes records in its own transaction on PostgreSQL only")
	}
	at := o.s.leaseAt()
	var recs []Record
	var deleted int64
	switch o.s.dialect {
	case sqlstore.PostgreSQL:
		recs, deleted, err = o.claimPostgres(ctx, batch, skip, done, at)
	case sqlstore.MySQL:
		var n int64
		n, err = o.claimMySQL(ctx, batch, skip, at)
		if err == nil && n > 0 {
			recs, err = o.s.query(ctx, q, `SELECT `+recordColumns+` FROM acemq_outbox WHERE locked_by = ? AND attempts < ? AND seq NOT IN (`+sqlstore.List(len(skip))+`) ORDER BY seq LIMIT `+fmt.Sprint(batch),
				append([]any{o.relay, MaxAttempts}, seqArgs(skip)...)...)
		}
	default:
		args := append([]any{o.relay, at, o.ttl.Milliseconds(), MaxAttempts}, seqArgs(skip)...)
		recs, err = o.s.query(ctx, q, fmt.Sprintf(claimSQL, sqlstore.List(len(skip)), o.s.dialect.NowMillis())+` RETURNING `+recordColumns, append(args, batch, o.relay, o.relay, at)...)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("acemq: cannot claim outbox records: %w", o.fail(err))
	}
	slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return recs, deleted, nil
}

func (s *Store) exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, err
	}
	return sqlstore.RowsAffected(res)
}

// holdersSQL lists the other relays holding unexpired locks (MySQL).
const holdersSQL = `SELECT DISTINCT locked_by FROM acemq_outbox WHERE locked_by IS NOT NULL AND locked_by <> ? AND locked_until > COALESCE(?, ` + mysqlNow + `)`

// mysqlNow is MySQL's now in epoch ms (sqlstore.MySQL.NowMillis()).
const mysqlNow = `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`

// pgClaimSQL is the PostgreSQL claim: one statement, one round trip, run
// at REPEATABLE READ on the relay's session (owner.session sets it). It
// deletes the relay's confirmed records done ($4, fenced: only those the
// relay still holds) and claims the first batch of unretired records but
// the seqs to pass over ($3) for relay $1 until $2, unless a live relay
// holds unexpired locks ($5: now); it claims only when the DELETE removed
// all $6 of done, so that records never go out before the ones before them
// are gone. It returns one row per claimed record, each with the number
// deleted, or one row of that number and NULLs when it claimed nothing.
// %[1]d is MaxAttempts and %[2]d the batch size, written into the text so
// that the planner sees the LIMIT (one text per batch size, which a
// driver that caches statements, as pgx does, prepares once per session).
//
// Why no claim lock: at REPEATABLE READ a statement that would change a
// record another transaction changed after the statement's snapshot fails
// (SQLSTATE 40001) instead of going on. Two relays that find the outbox
// free at once both choose the first unretired records, so their batches
// share records, and the later of the two claims fails and claims nothing
// (claimPostgres reads that as "another relay claimed first"). A relay
// that holds the outbox holds unexpired locks every other relay's claim
// sees, so no claim overlaps its batches. The one exception is a batch
// size of 1 and a record that committed late with a lower seq, seen by one
// of two relays starting at the same instant: each may claim one record,
// and each then sees the other and waits for it.
//
// A holder is live while its session holds its relay key:
// pg_try_advisory_xact_lock gets the key only when that session is gone
// (and lets it go at commit). The holder test runs only when a record
// carries another relay's name: the max below the relay's name and the
// min above it are each read from one end of a range of the locked_by
// index (PostgreSQL plans min and max on an indexed column so, whatever
// its statistics say), a range without the relay's own entries (one per
// record it ever claimed, until a vacuum). The test itself, "locked_by <
// relay OR locked_by > relay" for the reason claimSQL gives, is planned
// from statistics, and was planned as a scan of the whole table when there
// were none (a table filled since the last ANALYZE) or they had seen the
// relay's locks: 8 ms a claim, 18,000 records into a drain.
//
// The batch is chosen as seq = ANY(ARRAY(subquery)): with seq IN
// (subquery) PostgreSQL joined the subquery to a scan of the whole table
// (a hash semi-join: 19 ms a claim on 20,000 records, growing with the
// backlog); the array makes it look the batch up in the seq index (1 ms).
// done is found by seq too, its fence compared with IS NOT DISTINCT FROM,
// which PostgreSQL never answers from an index (for a name, never NULL,
// it is =): with = the planner took the locked_by index, visiting every
// entry the relay ever left there, whenever its statistics were older
// than the relay's claims.
var pgClaimSQL = `WITH done AS (
  DELETE FROM acemq_outbox WHERE seq = ANY($4::bigint[]) AND locked_by IS NOT DISTINCT FROM $1::text RETURNING 1),
claimed AS (
  UPDATE acemq_outbox SET locked_by = $1::text, locked_until = COALESCE($5::bigint, ` + pgNow + `) + $2::bigint
  WHERE seq = ANY(ARRAY(SELECT seq FROM acemq_outbox WHERE attempts < %[1]d AND seq <> ALL($3::bigint[]) ORDER BY seq LIMIT %[2]d))
  AND CASE WHEN (SELECT max(locked_by) FROM acemq_outbox WHERE locked_by < $1::text) IS NULL
    AND (SELECT min(locked_by) FROM acemq_outbox WHERE locked_by > $1::text) IS NULL THEN true
    ELSE NOT EXISTS (SELECT 1 FROM acemq_outbox o WHERE (o.locked_by < $1::text OR o.locked_by > $1::text) AND o.locked_until > COALESCE($5::bigint, ` + pgNow + `)
      AND CASE WHEN o.locked_until > COALESCE($5::bigint, ` + pgNow + `) THEN NOT pg_try_advisory_xact_lock(` + fmt.Sprintf(pgRelayKey, "o.locked_by") + `) ELSE false END) END
  AND (SELECT count(*) FROM done) = $6::bigint
  RETURNING ` + recordColumns + `)
SELECT (SELECT count(*) FROM done) AS deleted, claimed.* FROM (SELECT) AS one LEFT JOIN claimed ON true`

// pgNow is PostgreSQL's now in epoch ms (sqlstore.PostgreSQL.NowMillis()).
const pgNow = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT`

// pgSerializationFailure is PostgreSQL's SQLSTATE for a statement that
// would change what another transaction changed after its snapshot.
const pgSerializationFailure = "40001"

// claimPostgres claims in one round trip (pgClaimSQL) and returns the
// batch and how many of done it deleted. A claim that lost a race to
// another relay's (a serialization failure) claimed and deleted nothing:
// without done that is no batch and no error; with done it is the error,
// for the relay's records were changed by another relay.
func (o *owner) claimPostgres(ctx context.Context, batch int, skip, done []int64, at any) ([]Record, int64, error) {
	if done == nil {
		done = []int64{} // an empty array, not NULL
	}
	if o.pgClaimBatch != batch { // batch > 0: also when none is written yet
		o.pgClaim, o.pgClaimBatch = fmt.Sprintf(pgClaimSQL, MaxAttempts, batch), batch
	}
	rows, err := o.conn.QueryContext(ctx, o.pgClaim,
		o.relay, o.ttl.Milliseconds(), skip, done, at, len(done))
	if err != nil {
		return nil, 0, lostRace(err, done)
	}
	defer rows.Close()
	var (
		recs    []Record
		deleted int64
	)
	for rows.Next() {
		var (
			r                                    Record
			seq, created, attempts, lockedUntil  sql.NullInt64
			id, exchange, key, contentType, hdrs sql.NullString
			lastErr, lockedBy                    sql.NullString
		)
		if err := rows.Scan(&deleted, &seq, &id, &exchange, &key, &contentType, &hdrs, &r.Body, &created, &attempts, &lastErr, &lockedBy, &lockedUntil); err != nil {
			return nil, 0, err
		}
		if !seq.Valid {
			continue // nothing claimed
		}
		r.Seq, r.ID, r.Exchange, r.RoutingKey, r.ContentType, r.Attempts = seq.Int64, id.String, exchange.String, key.String, contentType.String, int(attempts.Int64)
		if err := r.fill(hdrs.String, created.Int64, lastErr, lockedBy, lockedUntil); err != nil {
			return nil, 0, err
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, lostRace(err, done)
	}
	return recs, deleted, nil
}

// lostRace returns a claim's failure, or nil when the claim deleted
// nothing (done is empty) and lost to another relay's (a serialization
// failure): that relay claimed first, and there is no batch.
func lostRace(err error, done []int64) error {
	var st interface{ SQLState() string }
	if len(done) == 0 && errors.As(err, &st) && st.SQLState() == pgSerializationFailure {
		return nil
	}
	return err
}

// mysqlLockName is the GET_LOCK name that serialises claims: one per
// database, as PostgreSQL's advisory locks are (GET_LOCK names are
// server-wide), cut to the 64 characters MySQL allows. Two databases whose
// names share their first 51 characters share a lock, which costs only
// waiting.
const mysqlLockName = `LEFT(CONCAT('acemq_outbox.', COALESCE(DATABASE(), '')), 64)`

// claimMySQL runs the claim under a named lock held by the relay's
// session. It reads with plain (consistent) SELECTs and then changes the
// chosen rows by primary key: an InnoDB UPDATE that scans the table locks
// every row it reads, so a scanning UPDATE would wait for each open
// transaction that called Add (until it commits) and hold up new Adds
// meanwhile. The named lock makes the reads and the UPDATE one step for
// other relays. A holder of unexpired locks is alive while its relay lock
// is taken (IS_FREE_LOCK); a dead holder's locks are cleared.
func (o *owner) claimMySQL(ctx context.Context, batch int, skip []int64, at any) (int64, error) {
	ttl := o.ttl
	c := o.conn
	// A relay frozen while it holds the claim lock loses its session (and
	// the lock) after the lease: the server closes a session idle longer
	// than wait_timeout. The default comes back after the claim.
	if _, err := c.ExecContext(ctx, fmt.Sprintf(`SET SESSION wait_timeout = %d`, max(int64(ttl.Round(time.Second)/time.Second), 1))); err != nil {
		return 0, err
	}
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(`+mysqlLockName+`, 30)`).Scan(&got); err != nil {
		return 0, err
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("another relay on this database held the claim lock for 30s; the next sweep tries again")
	}
	defer func() {
		bg := context.WithoutCancel(ctx)
		c.ExecContext(bg, `SELECT RELEASE_LOCK(`+mysqlLockName+`)`) //nolint:errcheck // closing the session releases it too
		c.ExecContext(bg, `SET SESSION wait_timeout = DEFAULT`)     //nolint:errcheck // a failure here fails the next statement too
	}()
	holders, err := sqlstore.Column(ctx, c, holdersSQL, o.relay, at)
	if err != nil {
		return 0, err
	}
	for _, h := range holders {
		var free sql.NullInt64
		if err := c.QueryRowContext(ctx, `SELECT IS_FREE_LOCK(`+mysqlRelayLock+`)`, h).Scan(&free); err != nil {
			return 0, err
		}
		if free.Int64 != 1 {
			return 0, nil
		}
		if err := unlockMySQL(ctx, c, h); err != nil {
			return 0, err
		}
	}
	ids, err := sqlstore.Column(ctx, c, `SELECT id FROM acemq_outbox WHERE attempts < ? AND seq NOT IN (`+sqlstore.List(len(skip))+`) ORDER BY seq LIMIT ?`,
		append(append([]any{MaxAttempts}, seqArgs(skip)...), batch)...)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	args := append([]any{o.relay, at, ttl.Milliseconds(), MaxAttempts}, ids...)
	return o.s.exec(ctx, c, `UPDATE acemq_outbox SET locked_by = ?, locked_until = COALESCE(?, `+mysqlNow+`) + ? WHERE attempts < ? AND id IN (`+sqlstore.List(len(ids))+`)`, args...)
}

// published deletes the relay's confirmed records in one statement. The
// delete is fenced: it removes only records the relay still holds, so a
// relay that lost its claim (its lease ran out while it was frozen, or its
// session died) deletes nothing another relay now owns. It returns how
// many it deleted.
func (o *owner) published(ctx context.Context, ids []any) (int64, error) {
	q, err := o.session(ctx)
	if err != nil {
		return 0, err
	}
	n, err := o.s.exec(ctx, q, `DELETE FROM acemq_outbox WHERE locked_by = ? AND id IN (`+sqlstore.List(len(ids))+`)`, append([]any{o.relay}, ids...)...)
	return n, o.fail(err)
}

// failed spends one attempt on a record the relay holds and keeps the
// reason; false when the relay no longer holds it (fenced as published).
func (o *owner) failed(ctx context.Context, id string, reason string) (bool, error) {
	q, err := o.session(ctx)
	if err != nil {
		return false, err
	}
	n, err := o.s.exec(ctx, q, `UPDATE acemq_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ? AND locked_by = ?`, truncate(reason, 1000), id, o.relay)
	return n == 1, o.fail(err)
}

// noted keeps reason as the last error of a record the relay holds,
// spending no attempt (an outage: the broker refused it for a reason of
// its own).
func (o *owner) noted(ctx context.Context, id string, reason string) error {
	q, err := o.session(ctx)
	if err != nil {
		return err
	}
	_, err = o.s.exec(ctx, q, `UPDATE acemq_outbox SET last_error = ? WHERE id = ? AND locked_by = ?`, truncate(reason, 1000), id, o.relay)
	return o.fail(err)
}

// unlock drops the relay's locks (a relay that stops hands over at once).
func (o *owner) unlock(ctx context.Context) error {
	q, err := o.session(ctx)
	if err != nil {
		return err
	}
	if o.s.dialect == sqlstore.MySQL {
		return o.fail(unlockMySQL(ctx, q, o.relay))
	}
	_, err = q.ExecContext(ctx, o.s.q(`UPDATE acemq_outbox SET locked_by = NULL, locked_until = NULL WHERE locked_by = ?`), o.relay)
	return o.fail(err)
}

// unlockMySQL drops relay's locks on MySQL: it finds them with a plain
// SELECT and unlocks by primary key, for the reason claimMySQL gives.
func unlockMySQL(ctx context.Context, q querier, relay any) error {
	ids, err := sqlstore.Column(ctx, q, `SELECT id FROM acemq_outbox WHERE locked_by = ?`, relay)
	if err != nil || len(ids) == 0 {
		return err
	}
	_, err = q.ExecContext(ctx, `UPDATE acemq_outbox SET locked_by = NULL, locked_until = NULL WHERE locked_by = ? AND id IN (`+sqlstore.List(len(ids))+`)`, append([]any{relay}, ids...)...)
	return err
}

// seqArgs returns seqs as statement arguments.
func seqArgs(seqs []int64) []any {
	out := make([]any, len(seqs))
	for i, v := range seqs {
		out[i] = v
	}
	return out
}

// truncate keeps at most n characters of s.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
