// Package outbox is the transactional outbox (AceMQ behaviour spec §7.1):
// a message is written in the same database transaction as the work that
// causes it, and a Relay publishes what committed.
//
// Store.Add runs on the caller's *sql.Tx and never begins, commits or rolls
// back; the message exists exactly when the caller's work does. The Relay
// publishes the stored bytes unchanged (content type and headers too) as a
// mandatory, persistent, confirmed library hop, and deletes a record only
// after the broker confirmed and routed it. Delivery is at least once: a
// relay that dies between the confirm and the delete sends the record
// again, so consumers must be idempotent (package idempotency).
//
// # Schema
//
// EnsureSchema creates the one table (same logical table in every dialect;
// only the column types and the sequence mechanism differ):
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS acemq_outbox (
//	  seq           BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
//	  id            VARCHAR(64) PRIMARY KEY,
//	  exchange_name VARCHAR(255) NOT NULL,
//	  routing_key   VARCHAR(255) NOT NULL,
//	  content_type  VARCHAR(255) NOT NULL,
//	  headers       TEXT NOT NULL,          -- JSON, see below
//	  body          BYTEA NOT NULL,
//	  created_at    BIGINT NOT NULL,        -- epoch ms
//	  attempts      INTEGER NOT NULL DEFAULT 0,
//	  last_error    VARCHAR(1000),
//	  locked_by     VARCHAR(64),
//	  locked_until  BIGINT);                -- epoch ms
//	CREATE INDEX IF NOT EXISTS acemq_outbox_attempts_seq ON acemq_outbox (attempts, seq);
//	CREATE INDEX IF NOT EXISTS acemq_outbox_locked_by ON acemq_outbox (locked_by);
//
// EnsureSchema adds an index a table made by an earlier version lacks
// (acemq_outbox_locked_by came with the relay's liveness locks).
//
// SQLite: the same, with seq BIGINT NOT NULL UNIQUE assigned by Add as
// (largest seq + 1) inside the insert (SQLite runs one writer at a time, so
// the value is unique and increasing), and body BLOB.
//
// MySQL: the same, with seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE, id and
// locked_by VARBINARY(64) (compared byte for byte: the default collations
// would take "Order-A" and "order-a " for one id), headers LONGTEXT (TEXT
// holds 64 KiB), body LONGBLOB, the indexes declared inside CREATE TABLE, and
// ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 (transactions and text in any
// script, whatever the server's defaults). EnsureSchema refuses a table
// that was there already without these, naming the ALTER TABLE that fixes
// it. Tested on MariaDB 10.11.
//
// Headers are the rendered wire headers (engine x-acemq-* headers and
// application headers) as a JSON object; strings and booleans are plain
// JSON and every other value carries its type ({"int32":1}), so the relay
// republishes exactly the types that were rendered.
//
// # Several relays
//
// Any number of relays may run against one database; one publishes at a
// time. A relay claims its next batch by setting locked_by/locked_until
// (the lease, 60 s) on the first 100 unretired records, and only when no
// other live relay holds unexpired locks. On PostgreSQL and MySQL a relay
// runs on a database session of its own that holds a lock named after
// the relay (a session-level advisory lock; GET_LOCK) for as long as the
// session lives, so the claim asks the database whether the holder is
// alive: when the holder's session is gone (its process died, its
// connection broke) its locks are taken over at once, without waiting out
// the lease. The lease is the fallback for a relay that is frozen with its
// session open (SIGSTOP, a paused VM): its locks are taken over when the
// lease expires. On SQLite the lease is the only sign of life. On
// PostgreSQL a claim is one statement (it also deletes the batch before,
// which went through), run at REPEATABLE READ on the relay's session:
// when two relays find the outbox free at once, both choose the first
// records, and the claim that commits second fails on the first one's
// changes and claims nothing; the session plans its statements by index
// alone (enable_seqscan and enable_sort off), whatever the table's
// statistics. Claims are serialised by a GET_LOCK named
// after the database on MySQL (held for one lease at most: wait_timeout),
// and by SQLite's single writer. On MySQL the claim reads with plain
// SELECTs and updates the chosen records by id, and the relay's session
// runs READ COMMITTED, so its statements never wait for (or block) an open
// transaction that called Add. A running relay therefore holds one pooled
// connection on PostgreSQL and MySQL.
//
// Leases are written and compared on the database's clock (now() in the
// claim's SQL, sqlstore.Dialect.NowMillis), never a relay's own, so a relay
// whose clock runs ahead cannot take another's records early; only the
// relay's own elapsed time (its three-quarter stop, below) is measured
// locally.
//
// Poolers: a relay needs a database session of its own (PostgreSQL: its
// session-level advisory lock tells other relays it is alive, and its
// session settings make the claim safe). A direct connection, or a pooler
// in session mode (PgBouncer's pool_mode = session), gives it one. Behind a
// pooler in transaction or statement mode its statements land on whichever
// server session is free, so the relay refuses to claim, with an error
// saying so: before taking its lock it asks another connection of the pool
// for its server process, which such a pooler answers with the relay's own
// (tested against PgBouncer 1.18 in both modes). Store.Add itself runs in
// the caller's transaction and works through any pooler.
//
// Fencing: a relay that lost its claim writes nothing another relay now
// owns. It writes a batch only while the claim is less than three
// quarters through its lease, reading the clock before every write, so a
// relay frozen past its lease stops when it wakes (a relay frozen in the
// middle of one write may still finish that one message); and its
// deletes and failure records name it (WHERE locked_by = the relay), so
// they touch only records it still holds.
//
// # Publishing and order
//
// A sweep publishes its batch as a pipeline: every record is written, in
// seq order, on one channel (so the broker routes them in that order) with
// the confirms outstanding together; writing stops as soon as a failure is
// known; the confirmed prefix (the records before the first failure) is
// deleted in one statement. A record that failed before is published
// alone, confirmed, before anything after it is written. Run keeps at
// most two batches on the wire, on the same channel, so the broker routes
// them in seq order: while batch N's confirms are outstanding, batch N+1 is
// written right behind it, and batch N+2 is claimed (the first stored
// records but those on the wire, claimed or waiting to be deleted), to be
// written once N is confirmed; meanwhile the batch before N, which went
// through, is deleted (on PostgreSQL by the claim's own statement). So the
// database work runs while the broker confirms. A batch is written only
// while no failure of the batch before it is known, and neither holds a
// record that failed before. A batch's records are deleted only after
// every record before them was (when a delete fails, nothing after it is
// deleted or claimed, and the batches after it go out again, in order). A
// sweep that failed waits for the confirms of the batch written behind its
// own and drops it and the batch claimed after it (their records stay
// stored), and the next sweep claims from the first stored record.
//
// What a consumer of one queue can rely on (records committed one after
// another, e.g. by one producer; records whose transactions overlap are in
// the order they became visible to the relay's claim):
//
//   - Without failures, records arrive in seq order. A relay that dies (or
//     loses its claim) after the confirm and before the delete makes the
//     next relay send those records again: a repeated run, so first copies
//     and last copies are each in seq order.
//   - When record k fails (unroutable, nacked, a missing exchange, a
//     timeout, a lost connection, a size limit), the records before it arrived in order,
//     and records after it that were already on the wire before the
//     failure was known may arrive once ahead of k: the rest of k's batch
//     and, for a running relay (Run), the next batch, never a record
//     further on (at most 2 × WithBatchSize − 1 records after k: the batch
//     claimed after the next is written only once k's batch is confirmed;
//     SweepOnce writes one batch at a time, so only the rest of k's). All of them stay
//     stored and are sent again after k is published (or retired). Once k
//     has failed it goes out alone (an attempt spent, or the relay held at
//     it by an outage), so a failing record causes this once per relay. A consumer that keeps the last copy of each id sees seq
//     order; one that drops duplicates by id (package idempotency) may see
//     such a record before k.
//   - A retired record (MaxAttempts failures) is skipped: the records
//     after it go out without it.
//
// # Failures
//
// Only what is about the record itself spends an attempt: a header over
// the limits Go consumers can read or over frame_max (acemq.ErrHeaderLimit)
// or a body over the maximum message size (acemq.ErrMessageTooLarge), which
// no change on the broker's side lets through: attempts + 1 and last_error
// (≤ 1,000 characters); at 10 attempts the record is retired: kept,
// skipped by relays, listed by Store.Retired and put back by
// Store.Release. Everything else is about the broker's state, an outage:
// a nack (a full queue with x-overflow reject-publish), an unroutable
// return (no queue bound yet), a missing exchange (404), a refused publish
// (blocked broker, recovery), a lost connection, a timeout. No attempt is
// spent (the reason is kept in last_error); the relay is held at that
// record (Relay.Held, Relay.Health DEGRADED), tries again with back-off
// (the interval, doubling, at most 30 s; wake-ups do not cut it short) and
// publishes the record alone before anything after it, so a later record
// of the sequence never goes out for good without it. A record that can
// never go (its exchange is gone for good) holds the relay until an
// operator retires it (Store.Retire). Either way the sweep stops at the
// first failure and deletes nothing after it (see the order rule above).
//
// The manual's page on the outbox: https://github.com/acemq-go/acemq/blob/main/docs/outbox.md
package outbox
