package crypto

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"
)

// The contract's key (bytes 00…1f), key id and nonce (bytes 00…0b), §2.3.
func vectorKey() Key {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i)
	}
	return Key{ID: "2026-01", Secret: secret}
}

func fixedNonce(b []byte) error {
	for i := range b {
		b[i] = byte(i)
	}
	return nil
}

func TestKnownAnswerVectorsEncryptAndDecryptByteForByte(t *testing.T) {
	vectors := []struct {
		name, plaintext, body string
	}{
		{"family vector: hello", "hello", "ae0107323032362d3031000102030405060708090a0b2f67ba77aa632797b83b1f88ef1394bb9ff6e85641"},
		{"derived: empty", "", "ae0107323032362d3031000102030405060708090a0be44cd7b8164ecaf8ed090759d8a8a01a"},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			ring, err := NewKeyring(vectorKey())
			if err != nil {
				t.Fatal(err)
			}
			ring.nonce = fixedNonce
			got, err := ring.Encrypt([]byte(v.plaintext))
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(got) != v.body {
				t.Fatalf("Encrypt(%q) =\n %x\nwant\n %s", v.plaintext, got, v.body)
			}
			want, _ := hex.DecodeString(v.body)
			plain, err := ring.Decrypt(context.Background(), want)
			if err != nil || string(plain) != v.plaintext {
				t.Fatalf("Decrypt = %q, %v; want %q", plain, err, v.plaintext)
			}
			if id, err := KeyIDOf(want); err != nil || id != "2026-01" {
				t.Fatalf("KeyIDOf = %q, %v", id, err)
			}
		})
	}
}

func TestProductionNoncesAreRandomPerMessage(t *testing.T) {
	ring, err := NewKeyring(vectorKey())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ring.Encrypt([]byte("hello"))
	b, _ := ring.Encrypt([]byte("hello"))
	h := 3 + len("2026-01")
	if bytes.Equal(a[h:h+nonceSize], b[h:h+nonceSize]) {
		t.Fatal("two messages share a nonce")
	}
	if bytes.Equal(a[h:h+nonceSize], make([]byte, nonceSize)) {
		t.Fatal("the nonce is all zeros")
	}
}
