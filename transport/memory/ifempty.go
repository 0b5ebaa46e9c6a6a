package memory

import (
	"context"

	"github.com/acemq-go/acemq/transport"
)

// DeleteQueueIfEmpty deletes a queue only while it holds no ready message,
// as RabbitMQ does (transport.EmptyDeleter): unacked deliveries do not
// stop it and go with the queue; a quorum queue refuses with 540
// NOT_IMPLEMENTED, which ends the connection.
func (ch *channel) DeleteQueueIfEmpty(ctx context.Context, name string) (int, error) {
	if err := ch.check(ctx); err != nil {
		return 0, err
	}
	n, e := ch.c.b.deleteQueueIfEmpty(name, ch.c)
	if e != nil {
		return 0, ch.fail(e)
	}
	return n, nil
}

func (b *Broker) deleteQueueIfEmpty(name string, c *conn) (int, *transport.Error) {
	b.mu.Lock()
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return 0, nil
	}
	if q.exclusive && q.owner != c {
		b.mu.Unlock()
		return 0, errLocked(name)
	}
	if q.quorum {
		b.mu.Unlock()
		e := chanErr(transport.CodeNotImplemented, "NOT_IMPLEMENTED", "cannot delete queue '%s' in vhost '/'. queue.delete operations with if-empty flag set are not supported by quorum queues", name)
		e.Connection = true
		return 0, e
	}
	q.mu.Lock()
	ready := q.ready.len()
	q.mu.Unlock()
	if ready > 0 {
		b.mu.Unlock()
		return 0, chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "queue '%s' in vhost '/' not empty", name)
	}
	n, cs := b.removeLocked(q)
	b.mu.Unlock()
	stopConsumers(cs)
	return n, nil
}
