package claimcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Store keeps offloaded payloads under keys it chooses. Implementations
// must be safe for concurrent use and must return once ctx is done.
type Store interface {
	// Put keeps payload and returns its key: 1 to 255 bytes of UTF-8 that
	// the store never hands out again.
	Put(ctx context.Context, payload []byte) (key string, err error)
	// Get returns the payload under key. found is false, with a nil error,
	// when there is none; an error means the store could not be asked (the
	// message is retried), and an error wrapping ErrInvalidKey means key is
	// not one this store could have written (the message is parked).
	Get(ctx context.Context, key string) (payload []byte, found bool, err error)
	// Delete removes the payload under key; a key with no payload is not
	// an error. See the package's retention rule before calling it.
	Delete(ctx context.Context, key string) error
}

// Pruner is a Store that can delete every payload stored before a time.
// Every store in this package is one.
type Pruner interface {
	// DeleteStoredBefore deletes the payloads stored before cutoff and
	// returns how many it deleted.
	DeleteStoredBefore(ctx context.Context, cutoff time.Time) (int64, error)
}

// Prune deletes the payloads s has held for longer than retention and
// returns how many it deleted. Retention must outlive every queue,
// dead-letter queue, parked queue and replay window that can still hold a
// message naming a payload (see the package documentation): a message
// read after its payload is gone is parked and can no longer be read. It
// fails for a retention that is not positive.
func Prune(ctx context.Context, s Pruner, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("acemq: a claim-check retention of %s would delete payloads still in flight; pass a period longer than any queue, dead-letter queue or replay keeps a message", retention)
	}
	return s.DeleteStoredBefore(ctx, time.Now().Add(-retention))
}

// ErrInvalidKey matches a key a store refuses to look up because it could
// not have written it (wrong characters, a path separator, too long).
var ErrInvalidKey = errors.New("acemq: the claim-check key is not one this store could have written")

func invalidKey(key, why string) error {
	return fmt.Errorf("%w: key %.64s %s", ErrInvalidKey, strconv.Quote(key), why)
}

// maxKey is the longest key any store here accepts, in bytes.
const maxKey = 255

// newKey returns a random key: 32 hex digits (128 bits from crypto/rand).
func newKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("acemq: cannot make a claim-check key: the system's random source failed: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// MemoryStore keeps payloads in this process's memory: for tests and for
// a publisher and consumer in one process. Payloads are lost when the
// process ends. The zero value is an empty store. Safe for concurrent use.
type MemoryStore struct {
	mu      sync.Mutex
	entries map[string]memoryEntry
	now     func() time.Time
}

type memoryEntry struct {
	payload []byte
	stored  time.Time
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: map[string]memoryEntry{}, now: time.Now}
}

// Put keeps a copy of payload under a new random key.
func (s *MemoryStore) Put(ctx context.Context, payload []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	key, err := newKey()
	if err != nil {
		return "", err
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	s.mu.Lock()
	if s.entries == nil {
		s.entries = map[string]memoryEntry{}
	}
	s.entries[key] = memoryEntry{payload: bytes.Clone(payload), stored: now()}
	s.mu.Unlock()
	return key, nil
}

// Get returns a copy of the payload under key.
func (s *MemoryStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	e, ok := s.entries[key]
	s.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(e.payload), true, nil
}

// Delete removes the payload under key.
func (s *MemoryStore) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	delete(s.entries, key)
	s.mu.Unlock()
	return nil
}

// DeleteStoredBefore deletes the payloads put before cutoff.
func (s *MemoryStore) DeleteStoredBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, e := range s.entries {
		if e.stored.Before(cutoff) {
			delete(s.entries, k)
			n++
		}
	}
	return n, nil
}

// Len returns how many payloads the store holds.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
