package rabbitmq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// A method whose context ends before the broker answers returns the
// context's error at once while the method finishes in the background
// (channel.call). What it finishes with must not be read by the caller:
// under -race, Consume, DeleteQueue, PurgeQueue and DeleteQueueIfEmpty
// read their results after an abandoned call while the background method
// was still to write them (the race detector saw it in subscribe during a
// recovery's reattach). Here the broker goes silent (the proxy drops what
// it sends), each call's 100 ms context ends, and the connection is then
// killed, so the background method returns and writes its results: the
// race detector fails the test if the caller read them.
func TestAnAbandonedMethodsResultsAreNotRead(t *testing.T) {
	calls := map[string]func(ctx context.Context, ch transport.Channel, q string) error{
		"Consume": func(ctx context.Context, ch transport.Channel, q string) error {
			_, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: q})
			return err
		},
		"ConsumeDirect": func(ctx context.Context, ch transport.Channel, q string) error {
			_, err := ch.(transport.DirectConsumer).ConsumeDirect(ctx, transport.ConsumeSpec{Queue: q})
			return err
		},
		"DeleteQueue": func(ctx context.Context, ch transport.Channel, q string) error {
			_, err := ch.DeleteQueue(ctx, q)
			return err
		},
		"PurgeQueue": func(ctx context.Context, ch transport.Channel, q string) error {
			_, err := ch.PurgeQueue(ctx, q)
			return err
		},
		"DeleteQueueIfEmpty": func(ctx context.Context, ch transport.Channel, q string) error {
			_, err := ch.(transport.EmptyDeleter).DeleteQueueIfEmpty(ctx, q)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			px, c, q := dialThroughBreakableProxy(t, "abandoned-"+name)
			ch := openChannel(t, c)
			px.Mute()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			err := call(ctx, ch, q)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s with the broker silent: %v, want the context's deadline", name, err)
			}
			px.Kill()
			closedWithin(t, c.Done(), wait, "the connection after the proxy was killed")
			closedWithin(t, ch.Done(), wait, "the channel after the proxy was killed")
			// A method without a deadline waits for the background one to
			// let go of the channel, so its writes happen within the test.
			_, _ = ch.DeclareQueue(context.Background(), transport.QueueSpec{Name: q, Passive: true})
		})
	}
}
