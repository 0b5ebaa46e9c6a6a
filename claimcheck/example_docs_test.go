package claimcheck_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/claimcheck"
	"github.com/acemq-go/acemq/crypto"
)

// The codec docs/claim-check.md builds: encryption inside, the claim check
// outside, so the store holds only ciphertext. ExampleNew sends a report
// through it.
func ExampleNew_encrypted() {
	secret := bytes.Repeat([]byte{1}, 32) // a service reads its key: crypto.KeyFromEnv, KeyFromFile, LoadKeyring
	store := claimcheck.NewMemoryStore()  // or NewFileStore(dir), NewSQLStore(db, dialect)

	key, err := crypto.KeyFromBytes("2026-01", secret)
	if err != nil {
		log.Fatal(err)
	}
	ring, err := crypto.NewKeyring(key) // the first key encrypts
	if err != nil {
		log.Fatal(err)
	}
	enc, err := crypto.NewCodec(acemq.JSON(), ring) // AES-GCM, application/vnd.acemq.encrypted
	if err != nil {
		log.Fatal(err)
	}
	codec, err := claimcheck.New(enc, store) // bodies of 64 KiB or more go to the store
	if err != nil {
		log.Fatal(err)
	}
	conn, err := acemq.Connect(context.Background(), "memory://claims", acemq.Config{Codec: codec})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(context.Background())

	fmt.Println(codec.ContentType())
	// Output: application/vnd.acemq.encrypted
}
