package memory

// Fault injection, for testing the code above the transport against the
// broker's moods. Every method is safe for concurrent use.

// Block raises a resource alarm, as RabbitMQ does when low on memory or
// disk. Like RabbitMQ, raising it tells nobody: a connection learns of it
// only when it writes a publish while the alarm is on. That publish is
// accepted but held, neither routed nor confirmed, and the connection's
// OnBlocked is then called with (true, reason), once per alarm, before
// Publish returns. As RabbitMQ stops reading a publishing connection's
// socket, such a connection is stalled until Unblock: its later publishes
// are held too, its acks, nacks and rejects take effect only at Unblock,
// and its other channel operations wait for Unblock (or their context).
// Connections that only consume are never told and carry on. Blocking a
// blocked broker does nothing.
func (b *Broker) Block(reason string) {
	b.alarmMu.Lock()
	defer b.alarmMu.Unlock()
	if b.blocked.Load() {
		return
	}
	b.blockReason = reason
	b.blocked.Store(true)
}

// Unblock clears the alarm: OnBlocked is called with (false, "") on the
// connections that were told they were blocked, and only those, then held
// publishes are routed and confirmed in order. Unblocking a broker that is
// not blocked does nothing.
func (b *Broker) Unblock() {
	b.alarmMu.Lock()
	if !b.blocked.Load() {
		b.alarmMu.Unlock()
		return
	}
	b.blocked.Store(false)
	b.blockReason = ""
	conns := b.snapshotConns()
	for _, c := range conns {
		if c.toldBlocked {
			c.toldBlocked = false
			if c.onBlocked != nil {
				c.onBlocked(false, "")
			}
		}
	}
	b.alarmMu.Unlock()
	for _, c := range conns {
		c.unstall()
	}
}

// DropConnections closes every connection as a broker shutdown would:
// each ends with 320 CONNECTION_FORCED (Server and Connection set), its
// pending confirms end Lost, its unacked messages are requeued as
// redelivered, and its exclusive queues are deleted. It returns once all
// of that is done.
func (b *Broker) DropConnections() {
	for _, c := range b.snapshotConns() {
		c.end(errForced())
	}
}

// NackNext makes the broker nack the next n confirmed publishes (on any
// connection) without routing them. n <= 0 cancels what is left.
func (b *Broker) NackNext(n int) {
	if n < 0 {
		n = 0
	}
	b.nackNext.Store(int64(n))
}

// takeNack reports whether this confirmed publish is to be nacked.
func (b *Broker) takeNack() bool {
	for {
		n := b.nackNext.Load()
		if n <= 0 {
			return false
		}
		if b.nackNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// DropConnectionsAtPublish arms a connection loss at the nth publish from
// now (n = 1: the next), counted on every connection, confirmed or not.
// That publish is taken but never routed, and every connection is then
// dropped as DropConnections drops them: its confirm, and every other
// pending one, ends Lost, so its publisher cannot know whether it
// arrived. DropConnectionsAfterPublish is the same loss after the publish
// was routed (it did arrive; only its confirm is lost). n <= 0 disarms
// either.
func (b *Broker) DropConnectionsAtPublish(n int) { b.armDrop(n, false) }

// DropConnectionsAfterPublish arms a connection loss just after the nth
// publish from now is routed, before its confirm is sent: the message is
// in its queues and its publisher hears Lost, the ambiguity a real
// connection loss leaves. See DropConnectionsAtPublish.
func (b *Broker) DropConnectionsAfterPublish(n int) { b.armDrop(n, true) }

func (b *Broker) armDrop(n int, routed bool) {
	b.dropRouted.Store(routed)
	b.dropAt.Store(int64(max(n, 0)))
}

// takeDrop reports whether this publish is the one an armed drop waits
// for, disarming it.
func (b *Broker) takeDrop() bool {
	for {
		n := b.dropAt.Load()
		if n <= 0 {
			return false
		}
		if b.dropAt.CompareAndSwap(n, n-1) {
			return n == 1
		}
	}
}

// StopConfirming makes the broker route publishes but withhold their
// confirms (and returns and nacks) until ResumeConfirming, as a busy
// broker would. A channel that ends meanwhile answers them Lost.
func (b *Broker) StopConfirming() { b.withhold.Store(true) }

// ResumeConfirming delivers the withheld confirms, in order, and confirms
// normally again.
func (b *Broker) ResumeConfirming() {
	b.withhold.Store(false)
	for _, c := range b.snapshotConns() {
		for _, p := range c.publishers() {
			p.releaseWithheld()
		}
	}
}
