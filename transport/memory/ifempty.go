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
	return b.deleteQueueChecked(name, c, func(q *queue) *transport.Error {
		if q.quorum {
			e := chanErr(transport.CodeNotImplemented, "NOT_IMPLEMENTED", "cannot delete queue '%s' in vhost '/'. queue.delete operations with if-empty flag set are not supported by quorum queues", name)
			e.Connection = true
			return e
		}
		q.mu.Lock()
		ready := q.ready.len()
		q.mu.Unlock()
		if ready > 0 {
			return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "queue '%s' in vhost '/' not empty", name)
		}
		return nil
	})
}
