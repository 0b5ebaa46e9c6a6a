// Package crypto encrypts AceMQ message bodies with AES-GCM in the
// family's framing (contract §2.3), so a Java, .NET, Python or Ruby AceMQ
// service reads what a Go one writes and the other way round.
//
// A body is framed as
//
//	0xAE  0x01  N  key-id (N bytes, 1..255)  nonce (12 bytes)  ciphertext+tag
//
// with the first 3+N bytes as associated data. The key id rides in the
// body, so a shovel that drops headers cannot separate a message from the
// name of its key, and KeyIDOf reads it without any key.
//
// NewCodec wraps any acemq.Codec: the inner codec encodes, the result is
// encrypted under the Keyring's current key and published with content
// type application/vnd.acemq.encrypted. Reading finds the key by the id in
// the body. Every decryption failure is fatal, so the consumer parks the
// message with a reason naming the key id (never a key, never plaintext):
// a missing key, a wrong key and a tampered body are not worth retrying.
// Only a KeyProvider that cannot be reached is retryable.
//
// Keys come from raw bytes (KeyFromBytes), from hex or base64 in an
// environment variable (KeyFromEnv) or a file (KeyFromFile), from a
// keyring file (LoadKeyring), or from a key management service through a
// KeyProvider, asked once per key id.
//
// With the claim check (package claimcheck), the claim check wraps the
// encryption — claimcheck.New(crypto codec, store) — so a store only ever
// holds ciphertext. NewCodec refuses the other order.
//
// The manual's page on encryption: https://github.com/acemq-go/acemq/blob/main/docs/encryption.md
package crypto
