package memory

import (
	"time"

	"github.com/acemq-go/acemq/transport"
)

// At-least-once dead-lettering, as RabbitMQ 3.10 and later do it for a
// quorum queue declared with x-dead-letter-strategy at-least-once and
// x-overflow reject-publish (any other overflow, or a classic queue, falls
// back to at-most-once, as there): a message the queue dead-letters stays
// in it, undeliverable and uncounted, until every queue the dead-letter
// exchange routes it to has taken it. One that reaches no queue (the
// exchange or the binding is missing) or that a full reject-publish queue
// refuses is tried again later: RabbitMQ's dead-letter worker tries again
// about three minutes after (measured on 3.10.8: a message retained for
// want of its target arrived 2 m 57 s after the target was bound), and so
// does this broker unless SetDeadLetterRetry says otherwise. Deleting the
// source queue drops what it retains, as on RabbitMQ.

// defaultDeadLetterRetry is how long a retained dead letter waits before
// it is routed again.
const defaultDeadLetterRetry = 3 * time.Minute

// retained is a dead letter an at-least-once queue keeps until its targets
// have taken it.
type retained struct {
	letter deadLetter
	taken  map[*queue]bool // targets that already hold it
}

// atLeastOnce reports whether a queue declared with args dead-letters at
// least once.
func atLeastOnce(args transport.Table) bool {
	_, dlx := args["x-dead-letter-exchange"].(string)
	return dlx && queueType(args) == "quorum" &&
		args["x-dead-letter-strategy"] == "at-least-once" && args["x-overflow"] == "reject-publish"
}

// SetDeadLetterRetry sets how long a dead letter an at-least-once queue
// could not hand over waits before it is routed again (three minutes
// unless set, as RabbitMQ). A test that exercises the retry sets it
// short. It is safe for concurrent use.
func (b *Broker) SetDeadLetterRetry(d time.Duration) {
	if d <= 0 {
		d = defaultDeadLetterRetry
	}
	b.dlxRetry.Store(int64(d))
}

func (b *Broker) deadLetterRetry() time.Duration {
	if d := b.dlxRetry.Load(); d > 0 {
		return time.Duration(d)
	}
	return defaultDeadLetterRetry
}

// Retained reports how many dead letters queue keeps because their
// targets have not all taken them yet (at-least-once dead-lettering); 0
// for a missing queue.
func (b *Broker) Retained(queue string) int {
	b.mu.RLock()
	q := b.queues[queue]
	b.mu.RUnlock()
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.retained)
}

// retain keeps r on its source queue and makes sure a retry is due.
func (q *queue) retain(r retained) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return
	}
	q.retained = append(q.retained, r)
	if q.retryTimer == nil {
		q.retryTimer = time.AfterFunc(q.b.deadLetterRetry(), q.retryRetained)
	}
}

// retryRetained routes every retained dead letter again.
func (q *queue) retryRetained() {
	q.mu.Lock()
	q.retryTimer = nil
	work := q.retained
	q.retained = nil
	deleted := q.deleted
	q.mu.Unlock()
	if deleted {
		return
	}
	for _, r := range work {
		q.b.deliverAtLeastOnce(r)
	}
}

// deliverAtLeastOnce routes a dead letter of an at-least-once queue to the
// targets that do not hold it yet; what is left over is retained again.
// It must be called without holding any broker lock.
func (b *Broker) deliverAtLeastOnce(r retained) {
	d := r.letter
	q := d.from
	key := d.m.routingKey
	if q.hasDLRK {
		key = q.dlrk
	}
	m := &message{exchange: q.dlx, routingKey: key, props: d.m.props, body: d.m.body}
	m.props.Headers = withDeath(d.m, q.name, d.reason)
	var more []deadLetter
	b.mu.RLock()
	var dst []*queue
	if q.dlx == "" {
		if t := b.queues[key]; t != nil {
			dst = append(dst, t)
		}
	} else if x := b.exchanges[q.dlx]; x != nil {
		dst = x.route(m, nil)
	}
	complete := len(dst) > 0
	for _, t := range dst {
		if r.taken[t] {
			continue
		}
		if d.reason != "rejected" && deathCycle(m.props.Headers, t.name) {
			continue // RabbitMQ drops messages that would cycle without a rejection
		}
		ok, dead := t.enqueue(m)
		more = append(more, dead...)
		if !ok {
			complete = false
			continue
		}
		if r.taken == nil {
			r.taken = map[*queue]bool{}
		}
		r.taken[t] = true
	}
	b.mu.RUnlock()
	if !complete {
		q.retain(r)
	}
	if len(more) > 0 {
		b.deadLetter(more)
	}
}
