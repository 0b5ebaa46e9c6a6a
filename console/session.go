package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"sync"
	"time"
)

// maxSessions bounds the sessions a console remembers; signing in beyond
// it ends the session that expires first.
const maxSessions = 10000

// sessions are the console's signed-in browsers. The cookie carries a
// session id, never the token: a random value that expires after a TTL,
// ends on sign-out, and is forgotten when the process stops (a restarted
// console signs every browser out). The CSRF token a page carries is
// derived from its session with a key that lives only in this process.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	key []byte // derives CSRF tokens
	m   map[string]time.Time
	now func() time.Time

	// codes are the one-time sign-in codes (SignInLink) not yet used,
	// with when each expires.
	codes   map[string]time.Time
	codeTTL time.Duration
}

func newSessions(ttl, codeTTL time.Duration) (*sessions, error) {
	key, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	return &sessions{ttl: ttl, key: []byte(key), m: map[string]time.Time{}, now: time.Now,
		codes: map[string]time.Time{}, codeTTL: codeTTL}, nil
}

// maxCodes bounds the sign-in codes waiting to be used; minting beyond it
// forgets the one that expires first.
const maxCodes = 100

// mint makes a one-time sign-in code.
func (s *sessions) mint() (string, error) {
	code, err := randomHex(16)
	if err != nil {
		return "", err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.codes {
		if !now.Before(exp) {
			delete(s.codes, k)
		}
	}
	if len(s.codes) >= maxCodes {
		var first string
		for k, exp := range s.codes {
			if first == "" || exp.Before(s.codes[first]) {
				first = k
			}
		}
		delete(s.codes, first)
	}
	s.codes[code] = now.Add(s.codeTTL)
	return code, nil
}

// redeem uses up code: true once, if it was minted and has not expired.
func (s *sessions) redeem(code string) bool {
	if code == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.codes {
		if subtleEqual(k, code) {
			delete(s.codes, k)
			return s.now().Before(exp)
		}
	}
	return false
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// start opens a session and returns its id.
func (s *sessions) start() (string, error) {
	id, err := randomHex(32)
	if err != nil {
		return "", err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.m {
		if !now.Before(exp) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		var first string
		var firstExp time.Time
		for k, exp := range s.m {
			if first == "" || exp.Before(firstExp) {
				first, firstExp = k, exp
			}
		}
		delete(s.m, first)
	}
	s.m[id] = now.Add(s.ttl)
	return id, nil
}

// valid reports whether id is a live session.
func (s *sessions) valid(id string) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.m[id]
	if ok && !s.now().Before(exp) {
		delete(s.m, id)
		return false
	}
	return ok
}

// end forgets a session.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// csrf is the CSRF token of a session.
func (s *sessions) csrf(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("acemq-console-csrf\x00"))
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

func subtleEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
