// Package idempotency is the idempotent consumer (AceMQ behaviour spec
// §7.2): a handler's effect happens once per message id although delivery
// is at least once. It is a guard, not exactly-once.
//
// Guard wraps a handler with a claim in a Store: claimed → run; accept →
// confirm; any other decision, an error or a panic → release, so a later
// delivery runs again; a confirmed key (duplicate) → accept without
// running; a live claim elsewhere → in progress (put back after 5s); a
// store error → retry. A claim is a lease (default 5 min) that must
// outlast the longest handler run; an expired unconfirmed claim (a worker
// that died) is taken over.
//
// # The window
//
// A confirmed key answers Duplicate for the store's retention
// (WithRetention, default 24 h; RetainFor for Transactional) and no
// longer: after it the key is forgotten, and a redelivery of the same
// message runs the handler again, whether or not the row was pruned. Set
// the retention longer than the longest way a message can come back (an
// outbox or broker outage, a dead-letter replay, a stream re-read from an
// old checkpoint). Prune removes only keys whose window ended, so it only
// frees space; run it with PruneEvery in a goroutine of the service's (an
// hour apart is plenty), or from a job of your own. The SQL store writes
// and compares these times on the database's clock.
//
// Transactional is the stronger form for handlers whose effect is in the
// same SQL database: the key is inserted as confirmed in the handler's own
// transaction, so "processed" and "effect" commit or roll back together
// and no lease is needed.
//
// # Schema
//
// SQLStore.EnsureSchema creates (all dialects):
//
//	CREATE TABLE IF NOT EXISTS acemq_idempotency (
//	  message_id  VARCHAR(255) PRIMARY KEY,
//	  state       VARCHAR(16) NOT NULL,   -- claimed | confirmed
//	  claimed_by  VARCHAR(64),            -- the claim's token
//	  recorded_at BIGINT NOT NULL,        -- epoch ms
//	  expires_at  BIGINT NOT NULL);       -- epoch ms: lease end, or retention end once confirmed
//	CREATE INDEX IF NOT EXISTS acemq_idempotency_expires ON acemq_idempotency (expires_at);
//
// MySQL declares the index inside CREATE TABLE, makes message_id
// VARBINARY(1020) and claimed_by VARBINARY(64) (compared byte for byte:
// the default collations would take "Order-1" and "order-1 " for one key,
// and the second message would never run; 1020 bytes hold 255 characters)
// and the table ENGINE=InnoDB DEFAULT CHARSET=utf8mb4, whatever the
// server's defaults; EnsureSchema refuses a table that was there already
// without these, naming the ALTER TABLE that fixes it.
// On MySQL a key longer than 255 characters is refused before it reaches
// the server, as acemq.Fatal: a server not in strict mode would cut it
// short and take two long keys for one.
//
// The manual's page on idempotent consumers: https://github.com/acemq-go/acemq/blob/main/docs/idempotency.md
package idempotency
