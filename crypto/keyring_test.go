package crypto_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/crypto"
)

func secret(fill byte, n int) []byte { return bytes.Repeat([]byte{fill}, n) }

func key(t *testing.T, id string, fill byte) crypto.Key {
	t.Helper()
	k, err := crypto.KeyFromBytes(id, secret(fill, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ring(t *testing.T, keys ...crypto.Key) *crypto.Keyring {
	t.Helper()
	r, err := crypto.NewKeyring(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func encrypt(t *testing.T, r *crypto.Keyring, plain string) []byte {
	t.Helper()
	b, err := r.Encrypt([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keyIDOf(t *testing.T, body []byte) string {
	t.Helper()
	id, err := crypto.KeyIDOf(body)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestFirstKeyIsCurrentAndRotationKeepsOldKeysDecrypting(t *testing.T) {
	r := ring(t, key(t, "k1", 1), key(t, "k0", 0))
	if id, _ := r.Current(); id != "k1" {
		t.Fatalf("current = %q, want the first key", id)
	}
	old := encrypt(t, r, "under k1")
	if err := r.Rotate(key(t, "k2", 2)); err != nil {
		t.Fatal(err)
	}
	fresh := encrypt(t, r, "under k2")
	if keyIDOf(t, fresh) != "k2" || keyIDOf(t, old) != "k1" {
		t.Fatalf("key ids %q, %q", keyIDOf(t, fresh), keyIDOf(t, old))
	}
	if err := r.Retire("k2"); err != nil {
		t.Fatal(err)
	}
	if id, _ := r.Current(); id != "k1" {
		t.Fatalf("after retiring k2 current = %q, want k1 (the next key not retired)", id)
	}
	for _, body := range [][]byte{old, fresh} {
		if _, err := r.Decrypt(context.Background(), body); err != nil {
			t.Fatalf("a message under a retired-but-kept key does not decrypt: %v", err)
		}
	}
	if got := r.IDs(); strings.Join(got, ",") != "k2,k1,k0" {
		t.Fatalf("IDs = %v", got)
	}
}

func TestAddingToAnEmptyRingMakesTheKeyCurrentAndDuplicatesAreRefused(t *testing.T) {
	r := ring(t)
	if _, err := r.Encrypt([]byte("x")); err == nil || !strings.Contains(err.Error(), "no current key") {
		t.Fatalf("Encrypt on an empty ring: %v", err)
	}
	if err := r.Add(key(t, "a", 1)); err != nil {
		t.Fatal(err)
	}
	if id, ok := r.Current(); !ok || id != "a" {
		t.Fatalf("current = %q, %v", id, ok)
	}
	for _, f := range []func(crypto.Key) error{r.Add, r.Rotate} {
		if err := f(key(t, "a", 2)); err == nil || !strings.Contains(err.Error(), "already in the keyring") {
			t.Fatalf("a second key under id a: %v", err)
		}
	}
	if err := r.Retire("nope"); err == nil {
		t.Fatal("retiring an unknown id succeeded")
	}
	if err := r.Remove("nope"); err == nil {
		t.Fatal("removing an unknown id succeeded")
	}
}

func TestKeyIDsAndKeySizesOutsideTheFramingAreRefused(t *testing.T) {
	for _, n := range []int{16, 24, 32} {
		if _, err := crypto.KeyFromBytes("k", secret(1, n)); err != nil {
			t.Errorf("%d-byte key refused: %v", n, err)
		}
	}
	if _, err := crypto.KeyFromBytes(strings.Repeat("é", 127)+"x", secret(1, 32)); err != nil {
		t.Errorf("a 255-byte key id is refused: %v", err)
	}
	bad := []struct {
		name, id string
		n        int
		want     string
	}{
		{"short key", "k", 15, "AES keys are 16, 24 or 32 bytes"},
		{"long key", "k", 64, "AES keys are 16, 24 or 32 bytes"},
		{"empty id", "", 32, "cannot be empty"},
		{"oversize id", strings.Repeat("k", 256), 32, "is 256 bytes"},
		{"id not UTF-8", "k\xff", 32, "must be UTF-8"},
	}
	for _, b := range bad {
		_, err := crypto.KeyFromBytes(b.id, secret(7, b.n))
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("%s: err = %v, want one containing %q", b.name, err, b.want)
		}
		if _, err := crypto.NewKeyring(crypto.Key{ID: b.id, Secret: secret(7, b.n)}); err == nil {
			t.Errorf("%s: NewKeyring accepted it", b.name)
		}
	}
}

func TestRemovedKeyIsAMissingKeyNamingTheIDAndNeverTheKey(t *testing.T) {
	k := key(t, "2026-01", 0xab)
	r := ring(t, key(t, "2026-02", 1), k)
	if err := r.Remove("2026-02"); err != nil {
		t.Fatal(err)
	}
	if err := r.Rotate(key(t, "2026-03", 3)); err != nil {
		t.Fatal(err)
	}
	other := ring(t, key(t, "2026-02", 1))
	body := encrypt(t, other, "secret payload")
	_, err := r.Decrypt(context.Background(), body)
	var mk *crypto.MissingKeyError
	if !errors.As(err, &mk) || mk.KeyID != "2026-02" || !errors.Is(err, crypto.ErrUnknownKey) {
		t.Fatalf("err = %v, want a MissingKeyError for 2026-02", err)
	}
	assertNoSecrets(t, err.Error(), [][]byte{k.Secret, secret(1, 32)}, "secret payload")
}

// assertNoSecrets fails when text holds a key (raw, hex or base64) or a
// plaintext.
func assertNoSecrets(t *testing.T, text string, keys [][]byte, plaintexts ...string) {
	t.Helper()
	for _, k := range keys {
		for _, form := range []string{string(k), hex.EncodeToString(k), base64.StdEncoding.EncodeToString(k)} {
			if strings.Contains(text, form) {
				t.Fatalf("%q holds a key", text)
			}
		}
	}
	for _, p := range plaintexts {
		if strings.Contains(text, p) {
			t.Fatalf("%q holds the plaintext %q", text, p)
		}
	}
}

func TestWrongKeyAndTamperingGiveTheSameError(t *testing.T) {
	right := ring(t, key(t, "k", 1))
	wrong := ring(t, key(t, "k", 2))
	body := encrypt(t, right, "attack at dawn")
	_, wrongErr := wrong.Decrypt(context.Background(), body)
	if !errors.Is(wrongErr, crypto.ErrDecrypt) {
		t.Fatalf("wrong key: %v", wrongErr)
	}
	// Every byte after the header: nonce, ciphertext, tag.
	for i := 3 + len("k"); i < len(body); i++ {
		tampered := bytes.Clone(body)
		tampered[i] ^= 0x01
		_, err := right.Decrypt(context.Background(), tampered)
		if err == nil || err.Error() != wrongErr.Error() {
			t.Fatalf("byte %d flipped: err = %v, want the wrong-key error %q", i, err, wrongErr)
		}
	}
	assertNoSecrets(t, wrongErr.Error(), [][]byte{secret(1, 32), secret(2, 32)}, "attack at dawn")
}

func TestMalformedFramesAreClearErrors(t *testing.T) {
	r := ring(t, key(t, "k", 1))
	good := encrypt(t, r, "hello")
	version2 := bytes.Clone(good)
	version2[1] = 2
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "the body is empty"},
		{"not framed", []byte(`{"id":1}`), "starts with 0x7b, not the 0xae"},
		{"unknown version", version2, "framing version 2, and this library reads version 1"},
		{"zero key id length", []byte{0xae, 1, 0, 1, 2}, "key id length is 0"},
		{"oversize key id announced", append([]byte{0xae, 1, 255}, "short"...), "announces a 255-byte key id; it was cut short"},
		{"key id not UTF-8", append([]byte{0xae, 1, 1, 0xff}, make([]byte, 28)...), "key id is not UTF-8"},
		{"truncated header", good[:2], "too short to hold the header"},
		{"truncated tag", good[:len(good)-len("hello")-1], "shorter than the"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Decrypt(context.Background(), c.body)
			if !errors.Is(err, crypto.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", err, c.want)
			}
		})
	}
	// Every truncation of a good frame is an error, never a panic.
	for n := range len(good) {
		if _, err := r.Decrypt(context.Background(), good[:n]); err == nil {
			t.Fatalf("a frame cut to %d bytes decrypted", n)
		}
	}
}

func TestProviderIsAskedOncePerKeyIDUnderConcurrency(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	p := crypto.KeyProviderFunc(func(ctx context.Context, id string) ([]byte, error) {
		calls.Add(1)
		<-release
		return secret(9, 32), nil
	})
	publisher := ring(t, key(t, "kms-1", 9))
	body := encrypt(t, publisher, "hi")
	r := ring(t)
	r.SetProvider(p)
	const readers = 20
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plain, err := r.Decrypt(context.Background(), body)
			if err == nil && string(plain) != "hi" {
				err = fmt.Errorf("plaintext %q", plain)
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling: the provider has no event for "called"
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the provider was asked %d times, want once", n)
	}
	if _, err := r.Decrypt(context.Background(), body); err != nil || calls.Load() != 1 {
		t.Fatalf("a later read asked again (%d calls) or failed: %v", calls.Load(), err)
	}
	if id, ok := r.Current(); ok {
		t.Fatalf("a key fetched for decrypting became current (%q)", id)
	}
}

func TestProviderOutageIsRetryableAndNotFoundIsFatal(t *testing.T) {
	body := encrypt(t, ring(t, key(t, "kms-2", 4)), "hi")
	var calls atomic.Int64
	down := true
	r := ring(t)
	r.SetProvider(crypto.KeyProviderFunc(func(ctx context.Context, id string) ([]byte, error) {
		calls.Add(1)
		if down {
			return nil, errors.New("connection refused")
		}
		return nil, fmt.Errorf("kms: %w", crypto.ErrKeyNotFound)
	}))
	_, err := r.Decrypt(context.Background(), body)
	if !acemq.IsRetryable(err) || !strings.Contains(err.Error(), `key id "kms-2"`) {
		t.Fatalf("outage: %v, want retryable naming the key id", err)
	}
	down = false
	_, err = r.Decrypt(context.Background(), body)
	if calls.Load() != 2 {
		t.Fatalf("a failed fetch was cached: %d calls", calls.Load())
	}
	if acemq.IsRetryable(err) || !errors.Is(err, crypto.ErrUnknownKey) {
		t.Fatalf("not found: %v, want a missing key, not retryable", err)
	}
}

func TestReaderWaitingOnTheProviderStopsWithItsContext(t *testing.T) {
	body := encrypt(t, ring(t, key(t, "slow", 4)), "hi")
	r := ring(t)
	r.SetProvider(crypto.KeyProviderFunc(func(ctx context.Context, id string) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := r.Decrypt(ctx, body)
	if !acemq.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a retryable deadline", err)
	}
}

func TestKeysFromEnvironmentAndFiles(t *testing.T) {
	raw := secret(0x5a, 32)
	t.Setenv("ACEMQ_TEST_KEY_HEX", hex.EncodeToString(raw))
	t.Setenv("ACEMQ_TEST_KEY_B64", base64.StdEncoding.EncodeToString(raw)+"\n")
	t.Setenv("ACEMQ_TEST_KEY_BAD", "zz"+hex.EncodeToString(raw)[2:])
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte(base64.RawURLEncoding.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, get := range map[string]func() (crypto.Key, error){
		"env hex":     func() (crypto.Key, error) { return crypto.KeyFromEnv("k", "ACEMQ_TEST_KEY_HEX", crypto.Hex) },
		"env base64":  func() (crypto.Key, error) { return crypto.KeyFromEnv("k", "ACEMQ_TEST_KEY_B64", crypto.Base64) },
		"file base64": func() (crypto.Key, error) { return crypto.KeyFromFile("k", file, crypto.Base64) },
	} {
		k, err := get()
		if err != nil || !bytes.Equal(k.Secret, raw) || k.ID != "k" {
			t.Errorf("%s: %v, %v", name, k, err)
		}
	}
	_, err := crypto.KeyFromEnv("k", "ACEMQ_TEST_KEY_BAD", crypto.Hex)
	if err == nil || !strings.Contains(err.Error(), "ACEMQ_TEST_KEY_BAD") || !strings.Contains(err.Error(), "not valid hex") {
		t.Fatalf("bad hex: %v", err)
	}
	assertNoSecrets(t, err.Error(), [][]byte{raw}, hex.EncodeToString(raw)[2:])
	if _, err := crypto.KeyFromEnv("k", "ACEMQ_TEST_KEY_UNSET_NEVER", crypto.Hex); err == nil || !strings.Contains(err.Error(), "is not set") {
		t.Fatalf("unset: %v", err)
	}
	if _, err := crypto.KeyFromFile("k", filepath.Join(dir, "missing"), crypto.Hex); err == nil {
		t.Fatal("a missing file gave a key")
	}
}

func TestKeyringFileNamesCurrentAndRetiredKeys(t *testing.T) {
	text := "# keys for orders\n\n" +
		"2026-02 hex:" + hex.EncodeToString(secret(2, 32)) + "\n" +
		"2026-01 base64:" + base64.StdEncoding.EncodeToString(secret(1, 16)) + " retired\n"
	r, err := crypto.ParseKeyring(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := r.Current(); id != "2026-02" || strings.Join(r.IDs(), ",") != "2026-02,2026-01" {
		t.Fatalf("current %q ids %v", id, r.IDs())
	}
	body := encrypt(t, ring(t, crypto.Key{ID: "2026-01", Secret: secret(1, 16)}), "old")
	if plain, err := r.Decrypt(context.Background(), body); err != nil || string(plain) != "old" {
		t.Fatalf("retired key: %q, %v", plain, err)
	}
	path := filepath.Join(t.TempDir(), "ring")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := crypto.LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"k\n", "k 0011\n", "k hex:zz\n", "k hex:00 old\n", "k hex:0011\n"} {
		_, err := crypto.ParseKeyring(strings.NewReader(bad))
		if err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: err = %v, want one naming line 1", bad, err)
		}
	}
}

func TestPrintingAKeyHidesItsSecret(t *testing.T) {
	k := key(t, "k", 0x41)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		out := fmt.Sprintf(verb, k)
		if !strings.Contains(out, `"k"`) || strings.Contains(out, "AAAA") || strings.Contains(out, "4141") || strings.Contains(out, "41 41") || strings.Contains(out, "QUFB") {
			t.Errorf("%s prints %q", verb, out)
		}
	}
}

func TestZeroKeyringIsAnEmptyRing(t *testing.T) {
	var r crypto.Keyring
	if _, err := r.Decrypt(context.Background(), encrypt(t, ring(t, key(t, "k", 1)), "x")); !errors.Is(err, crypto.ErrUnknownKey) {
		t.Fatalf("Decrypt on a zero ring: %v", err)
	}
	if err := r.Add(key(t, "k", 1)); err != nil {
		t.Fatal(err)
	}
	if id, ok := r.Current(); !ok || id != "k" {
		t.Fatalf("current = %q, %v", id, ok)
	}
}
