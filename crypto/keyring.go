package crypto

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/acemq-go/acemq"
)

// Key is a key id and its AES key (16, 24 or 32 bytes). Printing a Key
// with any fmt verb shows its id and never its secret.
type Key struct {
	ID     string
	Secret []byte
}

// Format prints the key id and hides the secret, whatever the verb.
func (k Key) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "crypto.Key{ID: %s, Secret: (%d bytes, hidden)}", strconv.Quote(k.ID), len(k.Secret))
}

// check refuses an id the framing cannot carry or a secret that is not an
// AES key. The error never holds the secret.
func (k Key) check() error {
	if err := checkKeyID(k.ID); err != nil {
		return err
	}
	switch len(k.Secret) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("acemq: key %s is %d bytes; AES keys are 16, 24 or 32 bytes (32 recommended)", strconv.Quote(k.ID), len(k.Secret))
}

// KeyProvider supplies keys a Keyring does not hold, such as keys kept in a
// key management service. A Keyring asks it at most once per key id at a
// time and keeps what it returns, so a busy consumer does not call the
// service per message.
type KeyProvider interface {
	// Key returns the secret for id (16, 24 or 32 bytes). It returns an
	// error wrapping ErrKeyNotFound when the service has no key with that
	// id (the message is then parked), and any other error when the
	// service could not be asked (the message is retried). It must return
	// once ctx is done.
	Key(ctx context.Context, id string) ([]byte, error)
}

// KeyProviderFunc adapts a function to KeyProvider.
type KeyProviderFunc func(ctx context.Context, id string) ([]byte, error)

// Key calls f.
func (f KeyProviderFunc) Key(ctx context.Context, id string) ([]byte, error) { return f(ctx, id) }

// ErrKeyNotFound is what a KeyProvider wraps to say it has no key with the
// id asked for.
var ErrKeyNotFound = errors.New("acemq: the key provider has no key with that id")

// entry is one key in the ring: its cipher, never its raw bytes.
type entry struct {
	id      string
	aead    cipher.AEAD
	retired bool
}

// flight is one KeyProvider call that other readers of the same id wait
// on.
type flight struct {
	done chan struct{}
	err  error
}

// Keyring holds the keys a codec encrypts and decrypts with. The current
// key — the first key in the ring that is not retired — encrypts; every key
// in the ring decrypts, retired or not. The zero value is an empty ring,
// as NewKeyring() returns. A Keyring is safe for concurrent use, and its
// keys may be changed while codecs use it.
type Keyring struct {
	mu       sync.RWMutex
	order    []*entry // precedence: the first one not retired is current
	byID     map[string]*entry
	provider KeyProvider
	flights  map[string]*flight

	// nonce fills a nonce; nil means crypto/rand. Only tests set it, to
	// reproduce the contract's known-answer vectors.
	nonce func([]byte) error
}

// NewKeyring returns a keyring holding keys, the first one current. It
// fails when a key id is empty, longer than 255 bytes or not UTF-8, when a
// secret is not 16, 24 or 32 bytes, or when an id appears twice. A keyring
// with no keys is valid: it can decrypt through a KeyProvider (see
// SetProvider) and cannot encrypt until a key is added.
func NewKeyring(keys ...Key) (*Keyring, error) {
	r := &Keyring{byID: map[string]*entry{}, flights: map[string]*flight{}}
	for _, k := range keys {
		if err := r.Add(k); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func newEntry(k Key) (*entry, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k.Secret)
	if err != nil {
		return nil, fmt.Errorf("acemq: key %s cannot be used for AES: %w", strconv.Quote(k.ID), err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("acemq: key %s cannot be used for AES-GCM: %w", strconv.Quote(k.ID), err)
	}
	return &entry{id: k.ID, aead: aead}, nil
}

// Add puts k at the end of the ring: it decrypts, and it encrypts only when
// no key before it is current (so the first key added to an empty ring
// becomes current). It fails when k is not a valid key or its id is
// already in the ring. The secret is copied into the cipher; the caller
// may clear its slice afterwards.
func (r *Keyring) Add(k Key) error {
	e, err := newEntry(k)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if _, ok := r.byID[k.ID]; ok {
		return fmt.Errorf("acemq: key id %s is already in the keyring; a key id names one key for ever, so give the new key a new id", strconv.Quote(k.ID))
	}
	r.byID[k.ID] = e
	r.order = append(r.order, e)
	return nil
}

// Rotate makes k the current key: new messages are encrypted under it,
// and the key that was current is kept for decrypting the messages already
// sent under it. It fails as Add does.
func (r *Keyring) Rotate(k Key) error {
	e, err := newEntry(k)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if _, ok := r.byID[k.ID]; ok {
		return fmt.Errorf("acemq: key id %s is already in the keyring; a key id names one key for ever, so give the new key a new id", strconv.Quote(k.ID))
	}
	r.byID[k.ID] = e
	r.order = append([]*entry{e}, r.order...)
	return nil
}

// Retire stops the key with id encrypting while keeping it for decrypting:
// messages under it still decrypt. If it was current, the next key in the
// ring that is not retired becomes current; with none left, encrypting
// fails until a key is added or rotated in. It fails when id is not in the
// ring.
func (r *Keyring) Retire(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("acemq: cannot retire key id %s: it is not in the keyring", strconv.Quote(id))
	}
	e.retired = true
	return nil
}

// Remove forgets the key with id. Messages under it can no longer be
// decrypted and are parked with the key id in the reason, so remove a key
// only once no queue, dead-letter queue or replay can still hold a message
// under it. It fails when id is not in the ring.
func (r *Keyring) Remove(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; !ok {
		return fmt.Errorf("acemq: cannot remove key id %s: it is not in the keyring", strconv.Quote(id))
	}
	delete(r.byID, id)
	r.order = slices.DeleteFunc(r.order, func(e *entry) bool { return e.id == id })
	return nil
}

// SetProvider makes the ring ask p for any key id it does not hold when it
// decrypts. A key p returns is kept in the ring as a retired key (it
// decrypts and never becomes current), so p is asked once per key id; concurrent readers of an id not
// yet fetched wait for one call. A nil p stops asking.
func (r *Keyring) SetProvider(p KeyProvider) {
	r.mu.Lock()
	r.provider = p
	r.mu.Unlock()
}

// Current returns the id of the key that encrypts, or false when no key in
// the ring is usable for encrypting.
func (r *Keyring) Current() (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.current(); e != nil {
		return e.id, true
	}
	return "", false
}

// IDs returns the key ids in the ring, current first, in precedence order.
func (r *Keyring) IDs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, len(r.order))
	for i, e := range r.order {
		ids[i] = e.id
	}
	return ids
}

// init makes the maps of a zero Keyring; the caller holds r.mu.
func (r *Keyring) init() {
	if r.byID == nil {
		r.byID = map[string]*entry{}
	}
	if r.flights == nil {
		r.flights = map[string]*flight{}
	}
}

func (r *Keyring) current() *entry {
	for _, e := range r.order {
		if !e.retired {
			return e
		}
	}
	return nil
}

// Encrypt frames plaintext under the current key with a fresh random nonce
// from crypto/rand. It fails when no key is current or the system's
// random source fails.
func (r *Keyring) Encrypt(plaintext []byte) ([]byte, error) {
	r.mu.RLock()
	e, fill := r.current(), r.nonce
	r.mu.RUnlock()
	if e == nil {
		return nil, errors.New("acemq: the keyring has no current key to encrypt with; add or rotate in a key")
	}
	if fill == nil {
		fill = func(b []byte) error { _, err := rand.Read(b); return err }
	}
	h := 3 + len(e.id)
	out := make([]byte, h+nonceSize, h+nonceSize+len(plaintext)+tagSize)
	out[0], out[1], out[2] = frameMagic, frameVersion, byte(len(e.id))
	copy(out[3:], e.id)
	nonce := out[h : h+nonceSize]
	if err := fill(nonce); err != nil {
		return nil, fmt.Errorf("acemq: cannot make a nonce: the system's random source failed: %w", err)
	}
	return e.aead.Seal(out, nonce, plaintext, out[:h]), nil
}

// Decrypt returns the plaintext of an encrypted frame. Errors:
// ErrMalformed for a body that is not a readable frame; ErrUnknownKey
// (a *MissingKeyError) when neither the ring nor its provider has the key
// id; ErrDecrypt (a *DecryptError) for a wrong key or an altered body,
// one error for both. A provider that fails for another reason gives an
// error marked acemq.Retryable. ctx bounds the wait for the provider only.
func (r *Keyring) Decrypt(ctx context.Context, body []byte) ([]byte, error) {
	id, ad, nonce, sealed, err := splitFrame(body)
	if err != nil {
		return nil, err
	}
	e, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	plain, err := e.aead.Open(nil, nonce, sealed, ad)
	if err != nil {
		return nil, &DecryptError{KeyID: id}
	}
	return plain, nil
}

// lookup finds the key with id in the ring or, failing that, asks the
// provider once (concurrent callers for one id share the call).
func (r *Keyring) lookup(ctx context.Context, id string) (*entry, error) {
	for {
		r.mu.Lock()
		if e, ok := r.byID[id]; ok {
			r.mu.Unlock()
			return e, nil
		}
		p := r.provider
		if p == nil {
			r.mu.Unlock()
			return nil, &MissingKeyError{KeyID: id}
		}
		if f, ok := r.flights[id]; ok {
			r.mu.Unlock()
			select {
			case <-f.done:
				if f.err == nil {
					continue // the key is in the ring now
				}
				if isContextErr(f.err) && ctx.Err() == nil {
					continue // the caller that asked gave up; ask again
				}
				return nil, f.err
			case <-ctx.Done():
				return nil, acemq.Retryable(fmt.Errorf("acemq: gave up waiting for the key provider to supply key id %s: %w", strconv.Quote(id), ctx.Err()))
			}
		}
		f := &flight{done: make(chan struct{})}
		r.init()
		r.flights[id] = f
		r.mu.Unlock()
		return r.fetch(ctx, p, id, f)
	}
}

// fetch asks p for id on behalf of every caller waiting on f.
func (r *Keyring) fetch(ctx context.Context, p KeyProvider, id string, f *flight) (e *entry, err error) {
	defer func() {
		if v := recover(); v != nil {
			e, err = nil, acemq.Retryable(fmt.Errorf("acemq: the key provider panicked when asked for key id %s: %v", strconv.Quote(id), v))
		}
		r.mu.Lock()
		delete(r.flights, id)
		if e != nil {
			if _, ok := r.byID[id]; !ok {
				r.byID[id] = e
				r.order = append(r.order, e)
			}
		}
		r.mu.Unlock()
		f.err = err
		close(f.done)
	}()
	secret, err := p.Key(ctx, id)
	switch {
	case errors.Is(err, ErrKeyNotFound):
		return nil, &MissingKeyError{KeyID: id}
	case err != nil && isContextErr(err):
		return nil, acemq.Retryable(fmt.Errorf("acemq: the key provider did not supply key id %s in time: %w", strconv.Quote(id), err))
	case err != nil:
		return nil, acemq.Retryable(fmt.Errorf("acemq: the key provider could not supply key id %s: %w; the message will be retried", strconv.Quote(id), err))
	}
	e, err = newEntry(Key{ID: id, Secret: secret})
	if err != nil {
		return nil, acemq.Fatal(fmt.Errorf("acemq: the key provider supplied an unusable key for id %s: %w", strconv.Quote(id), err))
	}
	e.retired = true // fetched to decrypt: it never becomes current by itself
	return e, nil
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
