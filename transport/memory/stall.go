package memory

import "context"

// A blocked RabbitMQ stops reading the socket of every connection that
// publishes, so everything such a connection sends afterwards (acks,
// declarations) waits with its publishes. A connection is stalled from
// the first publish it writes while the broker is blocked until Unblock,
// and that publish is what tells it of the block, as on RabbitMQ.

// heldPublish is called by p after it held a publish: while the alarm is
// on the connection is stalled and, the first time in this alarm, told it
// is blocked. When Unblock has cleared the alarm since the publish was
// held, the publish is routed now instead.
func (c *conn) heldPublish(p *publisher) {
	b := c.b
	b.alarmMu.Lock()
	if !b.blocked.Load() {
		b.alarmMu.Unlock()
		p.flushHeld()
		return
	}
	c.stall()
	if !c.toldBlocked {
		c.toldBlocked = true
		if c.onBlocked != nil {
			c.onBlocked(true, b.blockReason)
		}
	}
	b.alarmMu.Unlock()
}

// stall marks the connection stalled; the caller has just held a publish.
func (c *conn) stall() {
	c.mu.Lock()
	if !c.stalled {
		c.stalled = true
		c.unstalled = make(chan struct{})
		c.maybeStalled.Store(true)
	}
	c.mu.Unlock()
}

// deferIfStalled queues fn to run at Unblock when the connection is
// stalled, reporting whether it did.
func (c *conn) deferIfStalled(fn func()) bool {
	if !c.maybeStalled.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stalled {
		return false
	}
	c.deferred = append(c.deferred, fn)
	return true
}

// waitUnstalled waits, for an operation that expects a reply, until the
// connection is read again, ctx is done or the connection ends.
func (c *conn) waitUnstalled(ctx context.Context) error {
	if !c.maybeStalled.Load() {
		return nil
	}
	c.mu.Lock()
	stalled, ch := c.stalled, c.unstalled
	c.mu.Unlock()
	if !stalled {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.life.done:
		return closedErr(c.life.reason())
	}
}

// unstall resumes reading the connection: held publishes are routed, then
// what was sent after them runs, in order.
func (c *conn) unstall() {
	for _, p := range c.publishers() {
		p.flushHeld()
	}
	c.mu.Lock()
	deferred := c.deferred
	c.deferred = nil
	if c.stalled {
		c.stalled = false
		close(c.unstalled)
	}
	c.maybeStalled.Store(false)
	c.mu.Unlock()
	for _, fn := range deferred {
		fn()
	}
}
