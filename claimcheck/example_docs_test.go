package claimcheck_test

import (
	"bytes"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/crypto"
)

// The codec docs/encryption.md builds: encryption inside, the claim check
// outside, so the store holds only ciphertext. ExampleNew sends a report
// through it.
func ExampleNew_encrypted() {
	key := crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)}
	store := claimcheck.NewMemoryStore()

	ring, _ := crypto.NewKeyring(key)             // first key current
	enc, _ := crypto.NewCodec(acemq.JSON(), ring) // AES-GCM, application/vnd.acemq.encrypted
	codec, _ := claimcheck.New(enc, store)        // bodies ≥ 64 KiB go to the store

	_ = acemq.Config{Codec: codec}
}
