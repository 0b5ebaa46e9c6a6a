package memory

import (
	"sync"

	"github.com/acemq-go/acemq/transport"
)

// consumer is one subscription. The queue pushes entries into its outbox
// (under the queue's mutex); its pump goroutine tags them on the channel
// and hands them to the application.
type consumer struct {
	tag       string
	q         *queue
	ch        *channel
	prefetch  int
	exclusive bool
	// sharedHeaders: the subscriber promised to only read Headers
	// (ConsumeSpec.ReadOnlyHeaders), so deliveries share the message's.
	sharedHeaders bool

	// Guarded by q.mu.
	inflight int // delivered (or in the outbox) and not yet settled
	outbox   []entry
	cursor   int64 // streams: the next offset to hand out

	out    chan transport.Delivery // nil for a direct consumer
	wake   chan struct{}           // capacity 1: the outbox became non-empty
	stop   chan struct{}           // closed to stop the pump
	exited chan struct{}           // closed when the pump has returned
	once   sync.Once

	// A direct consumer (ConsumeDirect) has no pump: the subscriber's
	// goroutine takes the outbox in next. Lock order: nmu, then q.mu,
	// then the channel's mu.
	direct  bool
	nmu     sync.Mutex
	pending []entry // taken from the outbox and tagged; pending[pos:] not yet handed out
	pos     int
	first   uint64 // the delivery tag of pending[0]
	halted  bool
}

// halt stops the pump and waits for it to return; for a direct consumer
// it gives back what next has not handed out yet. It is idempotent.
func (c *consumer) halt() {
	c.once.Do(func() { close(c.stop) })
	if !c.direct {
		<-c.exited
		return
	}
	c.nmu.Lock()
	if c.halted {
		c.nmu.Unlock()
		return
	}
	c.halted = true
	var back []entry
	for j := c.pos; j < len(c.pending); j++ {
		if _, ok := c.ch.untrack(c.first + uint64(j)); ok {
			back = append(back, c.pending[j])
		}
	}
	c.pending = nil
	c.nmu.Unlock()
	c.giveBack(back)
}

func newConsumer(tag string, q *queue, ch *channel, prefetch int, exclusive, direct bool) *consumer {
	c := &consumer{
		tag: tag, q: q, ch: ch, prefetch: prefetch, exclusive: exclusive, direct: direct,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
	}
	if direct {
		close(c.exited) // there is no pump
		return c
	}
	buf := prefetch
	if buf == 0 || buf > 256 {
		buf = 256
	}
	c.out = make(chan transport.Delivery, buf)
	return c
}

// next is a direct consumer's: it hands out the next delivery, taking the
// outbox when what it took before is used up, and blocks until there is
// one. It reports false once the consumer is stopped or its channel has
// ended. One goroutine calls it at a time.
func (c *consumer) next() (transport.Delivery, bool) {
	for {
		c.nmu.Lock()
		if c.halted {
			c.nmu.Unlock()
			return transport.Delivery{}, false
		}
		if c.pos < len(c.pending) {
			i := c.pos
			c.pos++
			d := c.deliveryOf(&c.pending[i], c.first+uint64(i))
			c.pending[i] = entry{}
			c.nmu.Unlock()
			return d, true
		}
		c.pending, c.pos = c.pending[:0], 0
		c.nmu.Unlock()
		select {
		case <-c.wake:
		case <-c.stop:
			c.halt()
			return transport.Delivery{}, false
		}
		c.nmu.Lock()
		if c.halted {
			c.nmu.Unlock()
			return transport.Delivery{}, false
		}
		c.q.mu.Lock()
		c.pending, c.outbox = c.outbox, c.pending[:0]
		c.q.mu.Unlock()
		first, ok := c.ch.trackBatch(c, c.pending)
		if !ok {
			back := c.pending
			c.pending, c.halted = nil, true
			c.nmu.Unlock()
			c.giveBack(back)
			return transport.Delivery{}, false
		}
		c.first = first
		c.nmu.Unlock()
	}
}

// deliveryOf builds what the application receives for e under tag.
func (c *consumer) deliveryOf(e *entry, tag uint64) transport.Delivery {
	d := e.delivery(c.q.quorum, c.sharedHeaders && c.q.stream == nil)
	d.ConsumerTag = c.tag
	d.DeliveryTag = tag
	if c.q.stream != nil {
		if d.Headers == nil {
			d.Headers = transport.Table{}
		}
		d.Headers["x-stream-offset"] = e.offset
	}
	return d
}

// pump moves entries from the outbox to the application until stopped.
// Entries it holds when stopped go back to the head of the queue; they were
// never seen, so they are not marked redelivered.
func (c *consumer) pump() {
	defer close(c.exited)
	defer close(c.out)
	var batch []entry
	for {
		select {
		case <-c.wake:
		case <-c.stop:
			return
		}
		c.q.mu.Lock()
		batch, c.outbox = c.outbox, batch[:0]
		c.q.mu.Unlock()
		first, ok := c.ch.trackBatch(c, batch)
		if !ok {
			c.giveBack(batch)
			return
		}
		for i := range batch {
			d := c.deliveryOf(&batch[i], first+uint64(i))
			select {
			case c.out <- d:
			case <-c.stop:
				var back []entry
				for j := i; j < len(batch); j++ {
					if _, ok := c.ch.untrack(first + uint64(j)); ok {
						back = append(back, batch[j])
					}
				}
				c.giveBack(back)
				return
			}
		}
		clear(batch)
	}
}

// giveBack returns entries the application never saw to where they were
// taken from, or, while the channel ends, hands them to it to return with
// its unacked deliveries, behind them (channel.keepUnseen).
func (c *consumer) giveBack(es []entry) {
	if len(es) == 0 || c.ch.keepUnseen(c, es) {
		return
	}
	c.q.mu.Lock()
	c.inflight -= len(es)
	c.q.unacked -= len(es)
	for i := range es {
		es[i].deliveries--
	}
	c.q.restoreAllLocked(es)
	c.q.dispatchLocked()
	dead := c.q.takeDeadLocked()
	c.q.mu.Unlock()
	c.q.b.deadLetter(dead)
}

// detach removes the consumer from its queue, stops the pump and waits for
// it; undelivered entries go back to the queue head. It reports whether the
// queue is now an unused auto-delete queue.
func (c *consumer) detach() (autoDelete bool) {
	q := c.q
	q.mu.Lock()
	// Nothing is dispatched until everything this consumer held is back
	// at the head, in order (single.go).
	q.holds++
	for i, o := range q.consumers {
		if o == c {
			q.consumers = append(q.consumers[:i:i], q.consumers[i+1:]...)
			break
		}
	}
	q.mu.Unlock()
	// What the pump (or next) holds is older than the outbox: it goes back
	// first (while the channel ends, they are kept in that order for it).
	c.halt()
	q.mu.Lock()
	pending := c.outbox
	c.outbox = nil
	q.mu.Unlock()
	c.giveBack(pending)
	q.mu.Lock()
	autoDelete = q.autoDelete && !q.deleted && len(q.consumers) == 0
	q.mu.Unlock()
	q.unhold()
	return autoDelete
}
