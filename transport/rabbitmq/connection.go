package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// connection is one AMQP connection. Its methods are safe for concurrent
// use. One watcher goroutine per connection reports blocked/unblocked and
// closes done the moment the client reports the connection gone; it exits
// with the connection.
type connection struct {
	ac   *amqp.Connection
	done chan struct{}
	wg   sync.WaitGroup // the secret refresher, when there is one

	mu  sync.Mutex
	err error

	held *heldConn // nil when writes go straight to the socket (coalesce=off)

	// The native publish path (native.go); natives is nil when amqp091-go
	// publishes (frames=amqp091). writer is the heldConn every write
	// passes through, held or not; frameMax the negotiated frame_max.
	natives  *natives
	writer   *heldConn
	frameMax int
}

func newConnection(ac *amqp.Connection, onBlocked func(bool, string)) *connection {
	c := &connection{ac: ac, done: make(chan struct{})}
	closes := ac.NotifyClose(make(chan *amqp.Error, 1))
	var blocks chan amqp.Blocking
	if onBlocked != nil {
		blocks = ac.NotifyBlocked(make(chan amqp.Blocking, 4))
	}
	go c.watch(closes, blocks, onBlocked)
	return c
}

func (c *connection) watch(closes chan *amqp.Error, blocks chan amqp.Blocking, onBlocked func(bool, string)) {
	for {
		select {
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			if b.Active {
				onBlocked(true, b.Reason)
			} else {
				onBlocked(false, "")
			}
		case e, ok := <-closes:
			c.mu.Lock()
			if ok && e != nil {
				c.err = fromAMQPError(e)
			}
			c.mu.Unlock()
			close(c.done)
			// The client closes the blocked channel with the connection;
			// nothing more can arrive that needs reporting.
			return
		}
	}
}

// Channel opens a general-purpose channel. It fails with the connection's
// error (or transport.ErrClosed) when the connection has ended.
func (c *connection) Channel(ctx context.Context) (transport.Channel, error) {
	ch, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	return newChannel(ch), nil
}

// Publisher opens a publishing channel, in confirm mode when confirm is set.
func (c *connection) Publisher(ctx context.Context, confirm bool) (transport.Publisher, error) {
	ch, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	if c.natives != nil {
		p, err := newNativePublisher(ctx, ch, confirm, c.writer, c.natives, c.frameMax)
		if err != nil {
			return nil, c.cause(err)
		}
		return p, nil
	}
	if confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return nil, c.cause(err)
		}
	}
	return newPublisher(ch, confirm), nil
}

func (c *connection) open(ctx context.Context) (*amqp.Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch, err := c.ac.Channel()
	if err != nil {
		return nil, c.cause(err)
	}
	return ch, nil
}

// cause converts err, preferring the connection's own close reason when the
// client only says "closed".
func (c *connection) cause(err error) error {
	err = convertError(err)
	if err == transport.ErrClosed {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
	}
	return err
}

// Hold makes the connection keep what is written on it until the last
// holder releases it (transport.Holder). Safe for concurrent use.
func (c *connection) Hold(deadline time.Time) {
	if c.held != nil {
		c.held.Hold(deadline)
	}
}

// Release ends a Hold; the last holder out writes everything kept, in one
// call, before it returns. A failed write closes the connection: the
// publishes whose bytes were kept end Lost.
func (c *connection) Release(deadline time.Time) error {
	if c.held == nil {
		return nil
	}
	if err := c.held.Release(deadline); err != nil {
		return convertError(err)
	}
	return nil
}

// Done is closed as soon as the connection has ended, lost or closed.
func (c *connection) Done() <-chan struct{} { return c.done }

// Err is the broker's (or the network's) reason the connection ended, as a
// *transport.Error with Connection set; nil while open and after Close.
func (c *connection) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closeHandshake bounds Close's wait for the broker's close-ok. A broker
// that has blocked the connection (memory or disk alarm) stops reading its
// socket and never answers, and the client's own Close would wait forever.
const closeHandshake = 5 * time.Second

// Close closes the connection and every channel on it, waiting for the
// broker's close-ok (at most 5s; then the socket is dropped) and for Done.
func (c *connection) Close() error { return c.CloseWithin(closeHandshake) }

// CloseWithin is Close waiting at most d for the broker's close-ok before
// dropping the socket. Every channel has ended when it returns, so every
// pending publish has been answered.
func (c *connection) CloseWithin(d time.Duration) error {
	err := c.ac.CloseDeadline(time.Now().Add(d))
	<-c.done
	c.wg.Wait()
	if err == nil || convertError(err) == transport.ErrClosed {
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("rabbitmq: the broker did not answer the close within %s; the socket was dropped: %w", d, err)
	}
	return convertError(err)
}
