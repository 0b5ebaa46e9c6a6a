package memory

import (
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// defaultDeliveryLimit is the delivery limit of a quorum queue declared
// without x-delivery-limit, as on RabbitMQ 4.
const defaultDeliveryLimit = 20

// flowThreshold is the backlog, on a queue with consumers, above which
// publishers yield after each publish: a light form of RabbitMQ's credit
// flow, which slows publishers that outrun their consumers.
const flowThreshold = 4096

// queue holds ready messages and the consumers they are pushed to.
type queue struct {
	b          *Broker
	name       string
	durable    bool
	exclusive  bool
	autoDelete bool
	args       transport.Table
	owner      *conn // exclusive queues only

	// Settings read from args at declaration; immutable.
	ttl           int64 // nanoseconds; -1 means no x-message-ttl
	maxLen        int   // -1 means unbounded
	rejectPublish bool
	dlx           string
	hasDLX        bool
	dlrk          string
	hasDLRK       bool
	quorum        bool
	atLeastOnce   bool       // dead-letters at least once (atleastonce.go)
	single        bool       // x-single-active-consumer (single.go)
	deliveryLimit int64      // quorum only: counted returns allowed; -1 means none
	stream        *streamLog // non-nil for x-queue-type=stream; guarded by mu

	mu        sync.Mutex
	ready     deque
	consumers []*consumer
	rr        int // round-robin cursor into consumers
	// holds > 0 stops dispatch while a leaving consumer gives back what
	// it held (single.go).
	holds       int
	hadConsumer bool
	deleted     bool
	timer       *time.Timer
	timerAt     int64 // when the armed timer fires; 0 when none is armed
	dead        []deadLetter
	retained    []retained  // at-least-once dead letters not yet taken by all targets
	retryTimer  *time.Timer // routes retained again; nil when none is due
	// unacked counts messages handed to a consumer (or in its outbox) or
	// taken with basic.get, and not yet settled or given back.
	unacked int
	seq     int64 // the next entry's offset (its position; returns.go)
	returns int64 // the next returned entry's returnSeq (returns.go)
}

func newQueue(b *Broker, spec transport.QueueSpec, owner *conn) *queue {
	q := &queue{
		b: b, name: spec.Name, durable: spec.Durable, exclusive: spec.Exclusive,
		autoDelete: spec.AutoDelete, args: copyTable(spec.Args), ttl: -1, maxLen: -1,
		quorum: queueType(spec.Args) == "quorum",
	}
	if spec.Exclusive {
		q.owner = owner
	}
	if queueType(spec.Args) == "stream" {
		q.stream = newStreamLog(spec.Args)
		return q
	}
	if v, ok := toInt64(spec.Args["x-message-ttl"]); ok {
		q.ttl = v * int64(time.Millisecond)
	}
	if v, ok := toInt64(spec.Args["x-max-length"]); ok {
		q.maxLen = int(v)
	}
	q.rejectPublish = spec.Args["x-overflow"] == "reject-publish"
	q.single = singleActive(spec.Args)
	q.deliveryLimit = -1
	if q.quorum {
		q.deliveryLimit = defaultDeliveryLimit
		if v, ok := toInt64(spec.Args["x-delivery-limit"]); ok {
			q.deliveryLimit = max(v, -1)
		}
	}
	q.dlx, q.hasDLX = spec.Args["x-dead-letter-exchange"].(string)
	q.dlrk, q.hasDLRK = spec.Args["x-dead-letter-routing-key"].(string)
	q.atLeastOnce = atLeastOnce(spec.Args)
	return q
}

func (q *queue) info() transport.QueueInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	return transport.QueueInfo{Name: q.name, Messages: q.ready.len(), Consumers: q.consumerCountLocked()}
}

// takeDeadLocked hands over the dead letters collected under q.mu; the
// caller routes them after unlocking.
func (q *queue) takeDeadLocked() []deadLetter {
	d := q.dead
	q.dead = nil
	return d
}

func (q *queue) kill(e entry, reason string) {
	if !q.hasDLX && !q.b.watched() {
		return // dropped: deadLetter would skip it anyway, so keep nothing
	}
	q.dead = append(q.dead, deadLetter{from: q, m: e.m, reason: reason})
}

// enqueue adds m at the tail. ok is false when a full reject-publish queue
// refused it. The caller routes the returned dead letters.
func (q *queue) enqueue(m *message) (ok bool, dead []deadLetter) {
	if q.stream != nil {
		q.appendStream(m)
		return true, nil
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return true, nil
	}
	e := entry{m: m, offset: q.seq}
	q.seq++
	var now int64
	if q.ttl >= 0 {
		now = q.b.now()
		e.expireAt = now + q.ttl
	}
	if q.maxLen >= 0 && q.ready.len() >= q.maxLen {
		if q.rejectPublish {
			q.mu.Unlock()
			return false, nil
		}
		for q.ready.len() > 0 && q.ready.len() >= q.maxLen {
			q.kill(q.ready.popFront(), "maxlen")
		}
		if q.maxLen == 0 {
			q.kill(e, "maxlen")
			dead = q.takeDeadLocked()
			q.mu.Unlock()
			return true, dead
		}
	}
	q.ready.pushBack(e)
	q.dispatchAt(now)
	dead = q.takeDeadLocked()
	if q.ready.len() > flowThreshold && len(q.consumers) > 0 {
		q.b.flow.Store(true)
	}
	q.mu.Unlock()
	return true, dead
}

// restoreAllLocked puts entries the application never saw back where
// they were taken from (restoreLocked).
func (q *queue) restoreAllLocked(es []entry) {
	if q.deleted || q.stream != nil {
		return
	}
	for _, e := range es {
		q.restoreLocked(e)
	}
}

// expiredLocked drops expired messages at the head, dead-lettering them.
func (q *queue) expiredLocked(now int64) {
	for q.ready.len() > 0 && q.ready.front().expireAt != 0 && now > q.ready.front().expireAt {
		q.kill(q.ready.popFront(), "expired")
	}
}

// dispatchLocked pushes ready messages to consumers with credit, round
// robin (to the active one only on a single-active-consumer queue), then
// arms the expiry timer for what is left.
func (q *queue) dispatchLocked() { q.dispatchAt(0) }

// dispatchAt is dispatchLocked at broker time now (0: read the clock). A
// message published with x-message-ttl 0 is still delivered to a waiting
// consumer, as in RabbitMQ, because enqueue passes its own timestamp.
func (q *queue) dispatchAt(now int64) {
	if q.stream != nil {
		q.dispatchStreamLocked()
		return
	}
	if q.ttl >= 0 && q.ready.len() > 0 {
		if now == 0 {
			now = q.b.now()
		}
		q.expiredLocked(now)
	}
	for q.ready.len() > 0 && len(q.consumers) > 0 {
		c := q.nextConsumerLocked()
		if c == nil {
			break
		}
		e := q.ready.popFront()
		if e.expireAt != 0 && now > e.expireAt {
			q.kill(e, "expired")
			continue
		}
		e.deliveries++
		c.inflight++
		q.unacked++
		if len(c.outbox) == 0 {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
		c.outbox = append(c.outbox, e)
	}
	q.armLocked()
}

func (q *queue) nextConsumerLocked() *consumer {
	if q.holds > 0 {
		return nil
	}
	if q.single {
		return q.activeLocked()
	}
	n := len(q.consumers)
	for i := 0; i < n; i++ {
		c := q.consumers[(q.rr+i)%n]
		if c.prefetch == 0 || c.inflight < c.prefetch {
			q.rr = (q.rr + i + 1) % n
			return c
		}
	}
	return nil
}

// armLocked makes sure a timer fires when the head message expires.
func (q *queue) armLocked() {
	if q.ttl < 0 || q.ready.len() == 0 || q.deleted {
		return
	}
	at := q.ready.front().expireAt
	if q.timerAt != 0 && q.timerAt <= at {
		return
	}
	d := time.Duration(at - q.b.now() + 1)
	if d < 0 {
		d = 0
	}
	q.timerAt = at
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.onTimer)
	} else {
		q.timer.Reset(d)
	}
}

func (q *queue) onTimer() {
	q.mu.Lock()
	q.timerAt = 0
	if !q.deleted {
		q.expiredLocked(q.b.now())
		q.armLocked()
	}
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.b.deadLetter(dead)
}

// returnLocked puts a delivered entry back (at its original position in a
// classic queue, behind the other returned messages at the head of a
// quorum queue: putBackLocked), marked redelivered. A quorum queue counts the return when counted says it is a
// failure (RabbitMQ 4.3's rule: basic.reject with requeue and a channel or
// connection lost with the message unacked count, basic.nack does not):
// the entry's x-delivery-count rises, and a return over the queue's
// delivery limit dead-letters it (reason delivery_limit; dropped without
// a dead-letter exchange) instead.
func (q *queue) returnLocked(e entry, counted bool) {
	if q.deleted || q.stream != nil {
		return
	}
	if counted && q.quorum {
		e.failures++
		if q.deliveryLimit >= 0 && int64(e.failures) > q.deliveryLimit {
			q.kill(e, "delivery_limit")
			return
		}
	}
	e.redelivered = true
	q.putBackLocked(e)
}

// settle finishes one delivery from this queue: ack, return at the head
// with Redelivered (counted as returnLocked says), or dead-letter (dropped
// without a DLX).
func (q *queue) settle(u unacked, ack, requeue, counted bool) {
	q.mu.Lock()
	if u.c != nil {
		u.c.inflight--
	}
	q.unacked--
	if !ack && !q.deleted && q.stream == nil {
		if requeue {
			q.returnLocked(u.e, counted)
		} else {
			q.kill(u.e, "rejected")
		}
	}
	q.dispatchLocked()
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.b.deadLetter(dead)
}

// get pops the head message for basic.get; ok is false when none is ready.
func (q *queue) get() (e entry, left int, ok bool) {
	q.mu.Lock()
	if q.ttl >= 0 {
		q.expiredLocked(q.b.now())
	}
	if q.ready.len() > 0 {
		e, ok = q.ready.popFront(), true
		e.deliveries++
		q.unacked++
	}
	left = q.ready.len()
	q.armLocked()
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.b.deadLetter(dead)
	return e, left, ok
}

func (q *queue) purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stream != nil {
		return 0 // a stream is only ever truncated by retention
	}
	return q.ready.clear()
}

// markDeleted empties the queue and detaches its consumers, which the
// caller then stops. The caller holds the topology lock.
func (q *queue) markDeleted() (purged int, consumers []*consumer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = true
	if q.timer != nil {
		q.timer.Stop()
	}
	if q.retryTimer != nil {
		q.retryTimer.Stop()
	}
	q.retained = nil
	purged = q.ready.clear()
	consumers = q.consumers
	q.consumers = nil
	for _, c := range consumers {
		c.outbox = nil
	}
	return purged, consumers
}
