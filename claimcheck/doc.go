// Package claimcheck keeps large message bodies out of the broker
// (contract §2.4, behaviour §7.9). New wraps any acemq.Codec: a body the
// inner codec encodes to 64 KiB (65,536 bytes) or more is put in a Store
// and travels as a short framed key; a smaller one travels inline in a
// frame of its own. The content type stays the inner codec's, no header is
// set, and the reader dispatches on the body:
//
//	AC 01 00 + payload   inline: the rest is the inner codec's bytes
//	AC 01 01 + key       offloaded: the rest is the store key (UTF-8)
//	anything else        unframed (an older message): given to the inner codec as is
//
// Reading an offloaded body asks the store within the consumer's decode
// deadline (acemq.ConsumerConfig.DecodeTimeout): a store that fails or does not
// answer in time makes the message retryable; a key the store does not
// have makes it fatal, so it is parked with the key in the reason.
//
// # Retention
//
// The codec never deletes a payload: a message may be redelivered, set
// aside to a dead-letter or parked queue and replayed long after it was
// first consumed, and each of those reads needs the payload again. Delete
// payloads (Store.Delete, or Prune with a retention period) only once
// retention has outlived every queue, dead-letter queue, parked queue and
// replay window that can still hold a message naming them. A message whose
// payload is gone is parked, never lost, but it can no longer be read.
//
// # With encryption
//
// When both are used, the claim check wraps the encryption:
//
//	enc, _ := crypto.NewCodec(acemq.JSON(), ring)
//	codec, _ := claimcheck.New(enc, store)
//
// so the store only ever holds ciphertext, and the message's content type
// is application/vnd.acemq.encrypted. crypto.NewCodec refuses the other
// order.
//
// Stores: MemoryStore (one process, tests), FileStore (a directory: write
// to a temporary file, fsync, rename, fsync the directory; keys checked
// against path traversal) and SQLStore (a table on PostgreSQL, SQLite or
// MySQL, via package sqlstore).
//
// The manual's page on the claim check: https://github.com/acemq-go/acemq/blob/main/docs/claim-check.md
package claimcheck
