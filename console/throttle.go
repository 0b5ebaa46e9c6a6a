package console

import (
	"sync"
	"time"
)

// throttle bounds failed sign-ins (a wrong token in the form or in an
// Authorization header, a wrong or spent sign-in code): each client may
// fail burst times at once and then once per every period, and all
// clients together ten times that, so guessing is slow from one address
// and from many. A throttled attempt is answered 429 without being
// checked. Safe for concurrent use.
type throttle struct {
	mu      sync.Mutex
	burst   float64
	per     time.Duration
	clients map[string]*bucket
	all     bucket
	now     func() time.Time
}

type bucket struct {
	left      float64
	at        time.Time
	throttled bool // the last attempt was refused (audited once per run)
}

func newThrottle(burst int, per time.Duration) *throttle {
	return &throttle{burst: float64(burst), per: per, clients: map[string]*bucket{}, now: time.Now,
		all: bucket{left: float64(burst) * 10}}
}

// refill tops b up to limit for the time since it was last used.
func (t *throttle) refill(b *bucket, limit, rate float64, now time.Time) {
	if !b.at.IsZero() {
		b.left = min(limit, b.left+now.Sub(b.at).Seconds()*rate)
	}
	b.at = now
}

// allow reports whether client may try to sign in now, and, when not,
// whether this is the first refusal of a run (for the audit log) and how
// long until the next attempt is allowed.
func (t *throttle) allow(client string) (ok, first bool, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	rate := 1 / t.per.Seconds()
	b, found := t.clients[client]
	if !found {
		if len(t.clients) >= 10000 {
			t.clients = map[string]*bucket{} // bounded; forgets who failed
		}
		b = &bucket{left: t.burst}
		t.clients[client] = b
	}
	t.refill(b, t.burst, rate, now)
	t.refill(&t.all, t.burst*10, rate*10, now)
	if b.left >= 1 && t.all.left >= 1 {
		b.throttled = false
		return true, false, 0
	}
	first = !b.throttled
	b.throttled = true
	need := max((1-b.left)/rate, (1-t.all.left)/(rate*10))
	return false, first, time.Duration(need * float64(time.Second))
}

// failed counts one failed attempt of client.
func (t *throttle) failed(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.clients[client]; ok {
		b.left--
	}
	t.all.left--
}
