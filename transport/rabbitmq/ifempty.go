package rabbitmq

import "context"

// DeleteQueueIfEmpty deletes a queue only while it holds no ready message
// (transport.EmptyDeleter).
func (c *channel) DeleteQueueIfEmpty(ctx context.Context, name string) (int, error) {
	var n int
	err := c.call(ctx, func() error {
		var err error
		n, err = c.ch.QueueDelete(name, false, true, false)
		return err
	})
	if err != nil {
		return 0, err // n may still be written by an abandoned call
	}
	return n, nil
}
