package crypto_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/acemq-go/acemq/crypto"
)

// BenchmarkEncrypt1KiB and BenchmarkDecrypt1KiB measure what encryption
// adds per 1 KiB body: framing, a crypto/rand nonce and AES-256-GCM.
func BenchmarkEncrypt1KiB(b *testing.B) {
	r, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	plain := bytes.Repeat([]byte("x"), 1024)
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Encrypt(plain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecrypt1KiB(b *testing.B) {
	r, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	body, _ := r.Encrypt(bytes.Repeat([]byte("x"), 1024))
	b.SetBytes(1024)
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Decrypt(ctx, body); err != nil {
			b.Fatal(err)
		}
	}
}
