package memory

import "github.com/acemq-go/acemq/transport"

// Single active consumer (x-single-active-consumer), as RabbitMQ keeps it
// on classic and quorum queues: every basic.consume succeeds, but only the
// first consumer still registered receives messages; the others wait, in
// the order they subscribed. When the active consumer is cancelled, the
// next one becomes active at once, and the deliveries the cancelled one
// holds unacked stay with its channel until they are settled (handed back
// later, they come after whatever the new active consumer already got).
// When the active consumer's channel or connection ends instead, its
// unacked deliveries return to the head of the queue, in the order they
// were delivered, before the next consumer is made active, so it receives
// them first. Consumer priorities (x-priority) are not supported.

// singleActiveArg is the queue argument that turns it on.
const singleActiveArg = "x-single-active-consumer"

// singleActive reports whether a queue's arguments ask for a single
// active consumer.
func singleActive(args transport.Table) bool {
	v, _ := args[singleActiveArg].(bool)
	return v
}

// activeLocked returns the queue's active consumer when it has credit for
// another delivery, else nil. The caller holds q.mu.
func (q *queue) activeLocked() *consumer {
	if len(q.consumers) == 0 {
		return nil
	}
	c := q.consumers[0]
	if c.prefetch != 0 && c.inflight >= c.prefetch {
		return nil
	}
	return c
}

// hold stops dispatch from q until the matching unhold, so that what a
// leaving consumer gives back lands at the head of the queue before any
// consumer (the next active one, on a single-active-consumer queue) is
// offered a message.
func (q *queue) hold() {
	q.mu.Lock()
	q.holds++
	q.mu.Unlock()
}

// unhold ends one hold and dispatches what is ready, routing the dead
// letters that produced.
func (q *queue) unhold() {
	q.mu.Lock()
	q.holds--
	q.dispatchLocked()
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.b.deadLetter(dead)
}

// holdQueues holds the distinct queues of cs and returns them, for
// unholdQueues.
func holdQueues(cs []*consumer) []*queue {
	var qs []*queue
	for _, c := range cs {
		seen := false
		for _, q := range qs {
			if q == c.q {
				seen = true
				break
			}
		}
		if !seen {
			c.q.hold()
			qs = append(qs, c.q)
		}
	}
	return qs
}

func unholdQueues(qs []*queue) {
	for _, q := range qs {
		q.unhold()
	}
}

// validateSingleActive refuses an x-single-active-consumer that RabbitMQ
// refuses: any value but a boolean (406 naming its type), and the
// argument on a stream, whose AMQP 0-9-1 consumers have no single active
// consumer.
func validateSingleActive(name, queueType string, args transport.Table) *transport.Error {
	v, ok := args[singleActiveArg]
	if !ok {
		return nil
	}
	if queueType == "stream" {
		return invalidArgOfType(singleActiveArg, name, "rabbit_stream_queue")
	}
	if _, isBool := v.(bool); !isBool {
		return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "invalid arg '%s' for queue '%s' in vhost '/': {unacceptable_type,%s}", singleActiveArg, name, fieldType(v))
	}
	return nil
}

// consumerCountLocked is the consumer count a queue declaration reports:
// every consumer, except that a single-active-consumer quorum queue
// counts only its active one, as RabbitMQ does (a classic one counts the
// waiting ones too).
func (q *queue) consumerCountLocked() int {
	if q.single && q.quorum && len(q.consumers) > 1 {
		return 1
	}
	return len(q.consumers)
}

// invalidArgOfType is RabbitMQ 4's refusal of an argument the queue's type
// does not take.
func invalidArgOfType(arg, name, typ string) *transport.Error {
	return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "invalid arg '%s' for queue '%s' in vhost '/' of queue type %s", arg, name, typ)
}
