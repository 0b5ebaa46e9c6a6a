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
//
// SQLite: the same, with seq BIGINT NOT NULL UNIQUE assigned by Add as
// (largest seq + 1) inside the insert (SQLite runs one writer at a time, so
// the value is unique and increasing), and body BLOB.
//
// MySQL: the same, with seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE, id and
// locked_by VARBINARY(64) (compared byte for byte: the default collations
// would take "Order-A" and "order-a " for one id), headers LONGTEXT (TEXT
// holds 64 KiB), body LONGBLOB, the index declared inside CREATE TABLE, and
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
// Any number of relays may run against one database. A relay claims its
// next batch by setting locked_by/locked_until (60 s, renewed by every
// sweep) on the first 100 unretired records, and only when no record
// carries another relay's unexpired lock; the UPDATE's row count says
// whether it got them. On PostgreSQL the claim runs in a transaction that
// first takes a transaction-scoped advisory lock
// (pg_advisory_xact_lock), so two claims never evaluate "no other lock" on
// the same snapshot. On MySQL a GET_LOCK named after the database plays
// that part, and under it the claim reads with plain SELECTs and updates
// the chosen records by id (an InnoDB UPDATE that scans would wait for
// every open transaction that called Add). On SQLite the database's single
// writer does. So one relay publishes at a time, order holds, and a dead
// relay's lock is taken over when it expires.
//
// # Failures
//
// A nack or an unroutable return is about the record: attempts + 1 and
// last_error (≤ 1,000 characters); at 10 attempts the record is retired:
// kept, skipped by relays, listed by Store.Retired and put back by
// Store.Release. A refused publish (blocked broker, recovery), a lost
// connection or a timeout is not about the record: the sweep stops and no
// attempt is spent. Either way the sweep stops at the first failure, so
// later records never overtake an earlier one.
package outbox
