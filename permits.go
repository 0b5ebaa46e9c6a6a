package acemq

import (
	"context"
	"errors"
	"sync"
	"time"
)

// permits bounds the confirmed publishes waiting for the broker's answer
// (Config.MaxOutstandingPublishes) and lets Close wait until none is left
// without polling. The zero value is not usable; see newPermits.
type permits struct {
	slots chan struct{}

	mu   sync.Mutex
	idle chan struct{} // closed when the count reaches zero; nil when nobody waits
}

// errCeiling is acquire's answer when its timer fired first.
var errCeiling = errors.New("acemq: no publish permit came free in time")

func newPermits(n int) *permits { return &permits{slots: make(chan struct{}, n)} }

// tryAcquire takes a permit if one is free now.
func (p *permits) tryAcquire() bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// acquire takes a permit, waiting until one is free, t fires or ctx ends.
// It reports which: nil, or errCeiling / ctx's error.
func (p *permits) acquire(ctx context.Context, t <-chan time.Time) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-t:
		return errCeiling
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release returns a permit and wakes a waitIdle when none is left.
func (p *permits) release() {
	<-p.slots
	if len(p.slots) == 0 {
		p.mu.Lock()
		if p.idle != nil {
			close(p.idle)
			p.idle = nil
		}
		p.mu.Unlock()
	}
}

// outstanding is how many permits are taken now.
func (p *permits) outstanding() int { return len(p.slots) }

// waitIdle waits until no permit is taken, or until deadline or ctx.
func (p *permits) waitIdle(ctx context.Context, deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		p.mu.Lock()
		if len(p.slots) == 0 {
			p.mu.Unlock()
			return
		}
		if p.idle == nil {
			p.idle = make(chan struct{})
		}
		idle := p.idle
		p.mu.Unlock()
		select {
		case <-idle:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
