package memory

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/acemq-go/acemq/transport"
)

// ender is a channel or publisher that ends with its connection.
type ender interface{ end(err error) }

// conn implements transport.Connection. Its methods are safe for
// concurrent use.
type conn struct {
	b         *Broker
	onBlocked func(active bool, reason string)
	life      lifecycle
	limits    limits

	mu        sync.Mutex
	channels  map[ender]struct{}
	pubs      map[*publisher]struct{}
	stalled   bool          // see stall.go
	unstalled chan struct{} // closed when a stall ends
	deferred  []func()      // settlements sent while stalled
	// maybeStalled mirrors stalled for the lock-free fast path.
	maybeStalled atomic.Bool
	// toldBlocked is set once OnBlocked(true) was called in the current
	// alarm; guarded by b.alarmMu.
	toldBlocked bool
}

var _ transport.Connection = (*conn)(nil)

func (b *Broker) connect(cfg transport.Config, lim limits) *conn {
	c := &conn{b: b, onBlocked: cfg.OnBlocked, life: newLifecycle(), limits: lim,
		channels: map[ender]struct{}{}, pubs: map[*publisher]struct{}{}}
	b.connMu.Lock()
	b.conns[c] = struct{}{}
	b.connMu.Unlock()
	return c
}

// Channel opens a general-purpose channel; it fails with ErrClosed once
// the connection has ended.
func (c *conn) Channel(ctx context.Context) (transport.Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := &channel{c: c, life: newLifecycle()}
	if !c.register(ch, nil) {
		return nil, closedErr(c.life.reason())
	}
	return ch, nil
}

// Publisher opens a publishing channel, in confirm mode when confirm is
// true; it fails with ErrClosed once the connection has ended.
func (c *conn) Publisher(ctx context.Context, confirm bool) (transport.Publisher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := newPublisher(c, confirm)
	if !c.register(p, p) {
		p.stopConfirmer()
		return nil, closedErr(c.life.reason())
	}
	return p, nil
}

func (c *conn) register(e ender, p *publisher) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.life.ended() {
		return false
	}
	c.channels[e] = struct{}{}
	if p != nil {
		c.pubs[p] = struct{}{}
	}
	return true
}

func (c *conn) forget(e ender) {
	c.mu.Lock()
	delete(c.channels, e)
	if p, ok := e.(*publisher); ok {
		delete(c.pubs, p)
	}
	c.mu.Unlock()
}

func (c *conn) publishers() []*publisher {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*publisher, 0, len(c.pubs))
	for p := range c.pubs {
		out = append(out, p)
	}
	return out
}

// Done is closed when the connection has ended and everything on it has
// been cleaned up (unacked requeued, exclusive queues deleted).
func (c *conn) Done() <-chan struct{} { return c.life.done }

// Err says why the connection ended: a *transport.Error when the broker
// closed it, nil after Close.
func (c *conn) Err() error { return c.life.reason() }

// Close ends every channel on the connection (pending confirms Lost,
// unacked requeued) and deletes its exclusive queues. Closing twice is
// harmless.
func (c *conn) Close() error {
	c.end(nil)
	return nil
}

func (c *conn) end(err error) {
	if !c.life.begin(err) {
		return
	}
	c.mu.Lock()
	chs := make([]ender, 0, len(c.channels))
	for e := range c.channels {
		chs = append(chs, e)
	}
	c.mu.Unlock()
	cause := err
	if cause == nil {
		cause = transport.ErrClosed
	}
	for _, e := range chs {
		if p, ok := e.(*publisher); ok {
			p.end(cause)
			continue
		}
		e.end(err)
	}
	c.b.dropOwned(c)
	c.b.connMu.Lock()
	delete(c.b.conns, c)
	c.b.connMu.Unlock()
	c.life.finish()
}
