package rabbitmq

import "context"

// DeleteQueueIfEmpty deletes a queue only while it holds no ready message
// (transport.EmptyDeleter).
func (c *channel) DeleteQueueIfEmpty(ctx context.Context, name string) (int, error) {
	return callFor(ctx, c, func() (int, error) { return c.ch.QueueDelete(name, false, true, false) })
}
