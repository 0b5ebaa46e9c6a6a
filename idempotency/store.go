package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Defaults (spec §7.2).
const (
	DefaultLease           = 5 * time.Minute
	DefaultRetention       = 24 * time.Hour
	DefaultInProgressDelay = 5 * time.Second
)

// Outcome is what a claim found.
type Outcome int

const (
	// Claimed: the caller holds the key until its lease ends; run the work.
	Claimed Outcome = iota + 1
	// Duplicate: the key was confirmed; the work was done already.
	Duplicate
	// InProgress: someone else holds a live claim.
	InProgress
)

// String returns "claimed", "duplicate" or "in_progress".
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case InProgress:
		return "in_progress"
	}
	return "unknown"
}

// Claim is the answer of Store.Claim. Token identifies a Claimed lease;
// pass it to Confirm or Release.
type Claim struct {
	Outcome Outcome
	Token   string
}

// ErrClaimLost is returned by Confirm when the caller's claim is no
// longer there: its lease expired and another worker took it over, or it
// was released.
var ErrClaimLost = errors.New("acemq: the idempotency claim was lost (its lease expired and it was taken over, or it was released); the work may run again elsewhere")

// Store keeps idempotency keys. Implementations are safe for concurrent
// use, and across processes where they share a database.
type Store interface {
	// Claim takes key for lease: Claimed when the key is new or its
	// previous claim expired unconfirmed; Duplicate when confirmed;
	// InProgress when another claim is live. An error means nothing is
	// known; the caller should retry later.
	Claim(ctx context.Context, key string, lease time.Duration) (Claim, error)
	// Confirm marks the caller's claim done; the key then answers
	// Duplicate until pruned. ErrClaimLost when the claim is not the
	// caller's any more.
	Confirm(ctx context.Context, key, token string) error
	// Release deletes the caller's unconfirmed claim so the next delivery
	// runs; it never touches a confirmed key or someone else's claim.
	Release(ctx context.Context, key, token string) error
	// Prune removes confirmed keys recorded before olderThan and expired
	// claims, returning how many rows went.
	Prune(ctx context.Context, olderThan time.Time) (int, error)
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// MemoryStore is a Store in process memory: for tests and single-process
// services that accept losing the keys on restart. Safe for concurrent
// use. The zero value is not ready; use NewMemoryStore.
type MemoryStore struct {
	mu   sync.Mutex
	keys map[string]memEntry
	now  func() time.Time
}

type memEntry struct {
	confirmed bool
	token     string
	recorded  time.Time
	expires   time.Time
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{keys: map[string]memEntry{}, now: time.Now}
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, key string, lease time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, ok := s.keys[key]
	switch {
	case ok && e.confirmed:
		return Claim{Outcome: Duplicate}, nil
	case ok && now.Before(e.expires):
		return Claim{Outcome: InProgress}, nil
	}
	tok := newToken()
	s.keys[key] = memEntry{token: tok, recorded: now, expires: now.Add(lease)}
	return Claim{Outcome: Claimed, Token: tok}, nil
}

// Confirm implements Store.
func (s *MemoryStore) Confirm(ctx context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.keys[key]
	if !ok || e.confirmed || e.token != token {
		return ErrClaimLost
	}
	now := s.now()
	s.keys[key] = memEntry{confirmed: true, token: token, recorded: now, expires: now.Add(DefaultRetention)}
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[key]; ok && !e.confirmed && e.token == token {
		delete(s.keys, key)
	}
	return nil
}

// Prune implements Store.
func (s *MemoryStore) Prune(ctx context.Context, olderThan time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := s.now(), 0
	for k, e := range s.keys {
		if (e.confirmed && e.recorded.Before(olderThan)) || (!e.confirmed && e.expires.Before(now)) {
			delete(s.keys, k)
			n++
		}
	}
	return n, nil
}
