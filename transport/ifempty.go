package transport

import "context"

// EmptyDeleter is implemented by channels that can delete a queue only
// while it holds no ready message, checked and done in one step by the
// broker (AMQP's queue.delete with if-empty). A queue that holds one
// refuses with 406 PRECONDITION_FAILED and stays. RabbitMQ counts ready
// messages only: messages delivered and not yet acknowledged do not stop
// the delete, and go with the queue. Quorum queues do not support it:
// RabbitMQ answers 540 NOT_IMPLEMENTED, which ends the connection. A
// missing queue is deleted already (0, nil).
type EmptyDeleter interface {
	DeleteQueueIfEmpty(ctx context.Context, name string) (purged int, err error)
}

// CodeNotImplemented is AMQP's 540 NOT_IMPLEMENTED, a connection error:
// RabbitMQ's answer to an if-empty delete of a quorum queue.
const CodeNotImplemented = 540
