package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// connection is one transport connection to one broker address. With
// frames=amqp091 it is one amqp091-go connection. With frames=native (the
// default) it has up to two parts: publishers run on a connection AceMQ
// owns (own.go) and channels on an amqp091-go connection, each dialled when
// first needed (the one cfg.Purpose names, at Dial), so the engine's
// publishing and consuming connections are one socket each. The connection
// ends when any part ends; the others are then closed.
//
// Its methods are safe for concurrent use. One watcher goroutine per part
// reports blocked/unblocked and ends the connection when the part ends; it
// exits with the part, and Close waits for it.
type connection struct {
	plan      *dialPlan
	onBlocked func(bool, string)
	done      chan struct{}
	wg        sync.WaitGroup // the part watchers and the secret refresher

	dialMu sync.Mutex // serialises dialling a part

	mu    sync.Mutex
	err   error
	ended bool
	ac    *amqp.Connection // nil until dialled
	acW   *heldConn        // the amqp091-go part's writer, with ac
	own   *ownConn         // nil until dialled (always nil with frames=amqp091)

	// held is the writer holders hold (transport.Holder): the owned
	// connection's, or amqp091-go's socket with frames=amqp091; nil when
	// writes go straight to the socket (coalesce=off).
	held atomic.Pointer[heldConn]
}

// amqpPart returns the amqp091-go part, dialling it first if needed.
func (c *connection) amqpPart(ctx context.Context) (*amqp.Connection, error) {
	c.mu.Lock()
	ac, ended := c.ac, c.ended
	c.mu.Unlock()
	if ac != nil {
		return ac, nil
	}
	if ended {
		return nil, c.endedErr()
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if c.ac != nil {
		return c.ac, nil
	}
	ac, held, err := c.plan.dialAMQP(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		closeAMQP(ac, held, time.Now().Add(loseCloseWait))
		return nil, c.endedErr()
	}
	c.ac, c.acW = ac, held
	c.mu.Unlock()
	if c.plan.coalesce && !c.plan.native {
		c.held.Store(held)
	}
	closes := ac.NotifyClose(make(chan *amqp.Error, 1))
	var blocks chan amqp.Blocking
	if c.onBlocked != nil {
		blocks = ac.NotifyBlocked(make(chan amqp.Blocking, 4))
	}
	c.wg.Add(1)
	go c.watch(closes, blocks)
	return ac, nil
}

// ownPart returns the owned publishing part, dialling it first if needed.
func (c *connection) ownPart(ctx context.Context) (*ownConn, error) {
	c.mu.Lock()
	oc, ended := c.own, c.ended
	c.mu.Unlock()
	if oc != nil {
		return oc, nil
	}
	if ended {
		return nil, c.endedErr()
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if c.own != nil {
		return c.own, nil
	}
	oc, err := c.plan.dialOwn(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		_ = oc.closeWithin(loseCloseWait)
		return nil, c.endedErr()
	}
	c.own = oc
	c.mu.Unlock()
	if c.plan.coalesce {
		c.held.Store(oc.w)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-oc.done
		c.end(oc.Err())
	}()
	return oc, nil
}

// loseCloseWait bounds the close handshake of a part whose sibling ended.
const loseCloseWait = 25 * time.Millisecond

func (c *connection) endedErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return transport.ErrClosed
}

func (c *connection) watch(closes chan *amqp.Error, blocks chan amqp.Blocking) {
	defer c.wg.Done()
	for {
		select {
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			if b.Active {
				c.onBlocked(true, b.Reason)
			} else {
				c.onBlocked(false, "")
			}
		case e, ok := <-closes:
			var err error
			if ok && e != nil {
				err = fromAMQPError(e)
			}
			// The client closes the blocked channel with the connection;
			// nothing more can arrive that needs reporting.
			c.end(err)
			return
		}
	}
}

// end ends the connection once, with err as its reason (nil for a close
// of ours), and closes the parts still open.
func (c *connection) end(err error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	if c.err == nil {
		c.err = err
	}
	ac, acW, oc := c.ac, c.acW, c.own
	c.mu.Unlock()
	close(c.done)
	deadline := time.Now().Add(loseCloseWait)
	if oc != nil {
		_ = oc.closeWithin(loseCloseWait)
	}
	if ac != nil {
		closeAMQP(ac, acW, deadline)
	}
}

// closeAMQP closes the amqp091-go part by deadline, returning what its
// CloseDeadline does. The socket's write deadline is set first, through
// the writer under the client: a write blocked because the broker stopped
// reading holds the client's locks, and its own close (or a shutdown it
// began on a failed read) would wait for them before setting any deadline.
func closeAMQP(ac *amqp.Connection, w *heldConn, deadline time.Time) error {
	if w != nil {
		w.closeBy(deadline)
	}
	return ac.CloseDeadline(deadline)
}

// Channel opens a general-purpose channel. It fails with the connection's
// error (or transport.ErrClosed) when the connection has ended.
func (c *connection) Channel(ctx context.Context) (transport.Channel, error) {
	ch, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	gc := newChannel(ch)
	gc.stuck = c.end
	c.mu.Lock()
	if c.ac != nil {
		gc.server = serverOf(c.ac.Properties)
	}
	c.mu.Unlock()
	return gc, nil
}

// Publisher opens a publishing channel, in confirm mode when confirm is set.
func (c *connection) Publisher(ctx context.Context, confirm bool) (transport.Publisher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.plan.native {
		oc, err := c.ownPart(ctx)
		if err != nil {
			return nil, err
		}
		p, err := oc.publisher(ctx, confirm)
		if err != nil {
			return nil, c.cause(err)
		}
		// The owned connection's writer checks the frame it encodes
		// against the frame_max it negotiated (appendPublish).
		return p, nil
	}
	ch, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	if confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return nil, c.cause(err)
		}
	}
	p := newPublisher(ch, confirm)
	c.limit(p)
	c.mu.Lock()
	p.w = c.acW
	c.mu.Unlock()
	return p, nil
}

// limit gives p the frame_max negotiated with the broker.
func (c *connection) limit(p *publisher) {
	p.frameMax = c.ac.Config.FrameSize
}

func (c *connection) open(ctx context.Context) (*amqp.Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ac, err := c.amqpPart(ctx)
	if err != nil {
		return nil, c.cause(err)
	}
	ch, err := ac.Channel()
	if err != nil {
		return nil, c.cause(err)
	}
	return ch, nil
}

// serverOf reads the product and version from a connection.start's
// server-properties.
func serverOf(props amqp.Table) transport.Server {
	product, _ := props["product"].(string)
	version, _ := props["version"].(string)
	return transport.Server{Product: product, Version: version}
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
	if h := c.held.Load(); h != nil {
		h.Hold(deadline)
	}
}

// Release ends a Hold taken with deadline; the last holder out writes
// everything kept, in one call, before it returns, bounded by ctx (see
// transport.Holder). A failed write closes the connection: the publishes
// whose bytes were kept end Lost.
func (c *connection) Release(ctx context.Context, deadline time.Time) error {
	if h := c.held.Load(); h != nil {
		if err := h.Release(ctx, deadline); err != nil {
			return convertError(err)
		}
	}
	return nil
}

var _ transport.BrokerIdentity = (*connection)(nil)

// Broker returns the product and version the broker sent in
// connection.start on the amqp091-go part (the one channels run on); empty
// strings while that part has not been dialled. It implements
// transport.BrokerIdentity.
func (c *connection) Broker() (product, version string) {
	c.mu.Lock()
	ac := c.ac
	c.mu.Unlock()
	if ac == nil {
		return "", ""
	}
	product, _ = ac.Properties["product"].(string)
	version, _ = ac.Properties["version"].(string)
	return product, version
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
// pending publish has been answered. d bounds both parts together, and a
// write blocked because the broker stopped reading too: each part sets
// its socket's write deadline before it writes its close.
func (c *connection) CloseWithin(d time.Duration) error {
	deadline := time.Now().Add(d)
	c.dialMu.Lock() // no part is being dialled
	c.mu.Lock()
	first := !c.ended
	ac, acW, oc := c.ac, c.acW, c.own
	c.ended = true
	c.mu.Unlock()
	c.dialMu.Unlock()
	if first {
		close(c.done)
	}
	if acW != nil {
		acW.closeBy(deadline) // before the other part's close, too
	}
	if oc != nil {
		oc.w.closeBy(deadline)
	}
	var errs []error
	if oc != nil {
		if err := oc.closeWithin(time.Until(deadline)); err != nil && first {
			errs = append(errs, err)
		}
	}
	if ac != nil {
		err := closeAMQP(ac, acW, deadline)
		if err != nil && convertError(err) != transport.ErrClosed && first {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				errs = append(errs, fmt.Errorf("rabbitmq: the broker did not answer the close within %s; the socket was dropped: %w", d, err))
			} else {
				errs = append(errs, convertError(err))
			}
		}
	}
	c.wg.Wait()
	return errors.Join(errs...)
}
