package crypto_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/acemq-go/acemq"
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

// benchOrder is a 1 KiB JSON order, the size the codec benchmarks use.
type benchOrder struct {
	ID    string   `json:"id"`
	Lines []string `json:"lines"`
}

func oneKiBOrder() benchOrder {
	o := benchOrder{ID: "o-1"}
	for len(o.Lines) < 30 {
		o.Lines = append(o.Lines, "sku-000000000000000000000")
	}
	return o
}

// BenchmarkCodec1KiBOrder compares JSON with encrypted JSON for a 1 KiB
// order, encode and decode: the difference is encryption's overhead as a
// publisher and consumer see it.
func BenchmarkCodec1KiBOrder(b *testing.B) {
	r, _ := crypto.NewKeyring(crypto.Key{ID: "2026-01", Secret: bytes.Repeat([]byte{1}, 32)})
	enc, _ := crypto.NewCodec(acemq.JSON(), r)
	o := oneKiBOrder()
	for _, c := range []acemq.Codec{acemq.JSON(), enc} {
		body, _ := c.Encode(o)
		b.Run(c.Name()+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Encode(o); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.Name()+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var got benchOrder
				if err := c.Decode(c.ContentType(), body, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
