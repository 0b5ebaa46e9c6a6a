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
	// Duplicate for the store's retention (DefaultRetention unless
	// WithRetention), and after it is forgotten: a later delivery of the
	// same key runs again, whether or not Prune removed it yet.
	// ErrClaimLost when the claim is not the caller's any more.
	Confirm(ctx context.Context, key, token string) error
	// Release deletes the caller's unconfirmed claim so the next delivery
	// runs; it never touches a confirmed key or someone else's claim.
	Release(ctx context.Context, key, token string) error
	// Prune removes the keys whose window ended before olderThan and
	// before now (a confirmed key's retention, a claim's lease), returning
	// how many rows went. It never removes a key still within its window,
	// so pruning only frees space: what Claim answers does not depend on
	// it. Pass time.Now(); PruneEvery runs it periodically.
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
	mu        sync.Mutex
	keys      map[string]memEntry
	now       func() time.Time
	retention time.Duration
}

// StoreOption configures a MemoryStore or an SQLStore.
type StoreOption func(*storeOptions)

type storeOptions struct{ retention time.Duration }

// WithRetention sets how long a confirmed key answers Duplicate (default
// DefaultRetention, 24 h): the window within which a redelivery of a
// processed message is recognised. Make it longer than the longest way a
// message can come back: a broker or outbox outage, a dead-letter replay,
// a stream re-read from an old checkpoint. After it the key is forgotten
// and a redelivery runs the handler again. Zero or less means the
// default.
func WithRetention(d time.Duration) StoreOption {
	return func(o *storeOptions) {
		if d > 0 {
			o.retention = d
		}
	}
}

func newStoreOptions(opts []StoreOption) storeOptions {
	o := storeOptions{retention: DefaultRetention}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

type memEntry struct {
	confirmed bool
	token     string
	recorded  time.Time
	expires   time.Time
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(opts ...StoreOption) *MemoryStore {
	return &MemoryStore{keys: map[string]memEntry{}, now: time.Now, retention: newStoreOptions(opts).retention}
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
	case ok && e.confirmed && now.Before(e.expires):
		return Claim{Outcome: Duplicate}, nil
	case ok && !e.confirmed && now.Before(e.expires):
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
	s.keys[key] = memEntry{confirmed: true, token: token, recorded: now, expires: now.Add(s.retention)}
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
		if e.expires.Before(now) && e.expires.Before(olderThan) {
			delete(s.keys, k)
			n++
		}
	}
	return n, nil
}

// PruneEvery runs s.Prune(ctx, now) every interval until ctx ends, and
// returns ctx's error then; report (may be nil) gets each pass's count and
// error. Run it in a goroutine the service owns, one per store (any number
// of processes may prune one database). A failed pass is tried again at
// the next interval. interval must be positive.
func PruneEvery(ctx context.Context, s Store, interval time.Duration, report func(pruned int, err error)) error {
	if interval <= 0 {
		return errors.New("acemq: idempotency.PruneEvery needs a positive interval (an hour is plenty)")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, err := s.Prune(ctx, time.Now())
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if report != nil {
			report(n, err)
		}
	}
}
