package crypto

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
)

// FuzzDecrypt feeds arbitrary bodies to the frame reader and the keyring:
// no panic, only the three documented errors, and a body that decrypts
// names a key id KeyIDOf reads too. Allocation is bounded by the body: the
// frame carries no length that the reader trusts beyond the key id byte.
func FuzzDecrypt(f *testing.F) {
	for _, h := range []string{
		"ae0107323032362d3031000102030405060708090a0b2f67ba77aa632797b83b1f88ef1394bb9ff6e85641",
		"ae0107323032362d3031000102030405060708090a0be44cd7b8164ecaf8ed090759d8a8a01a",
		"ae0207323032362d3031000102030405060708090a0be44cd7b8164ecaf8ed090759d8a8a01a",
		"ae01ff", "ae0100", "ae01", "ae", "", "7b7d",
	} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	ring, err := NewKeyring(vectorKey())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, err := ring.Decrypt(context.Background(), body)
		id, idErr := KeyIDOf(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrDecrypt) && !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		if idErr != nil || id != "2026-01" {
			t.Fatalf("decrypted, and KeyIDOf = %q, %v", id, idErr)
		}
		if len(plain) != len(body)-3-len(id)-nonceSize-tagSize {
			t.Fatalf("plaintext of %d bytes from a %d-byte body", len(plain), len(body))
		}
	})
}
