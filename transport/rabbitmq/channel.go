package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// channel is a general-purpose channel: declarations, consuming, pulling
// and settling. Its methods are safe for concurrent use. A broker refusal
// (404, 406, ...) closes the channel, as AMQP does, and is returned as a
// *transport.Error. One watcher goroutine closes done when the channel
// ends and exits with it.
type channel struct {
	ch   *amqp.Channel
	done chan struct{}

	callMu sync.Mutex // serialises synchronous methods

	// settleMu keeps settlements off the wire once Close has begun: a
	// frame that follows channel.close makes RabbitMQ close the whole
	// connection (504 CHANNEL_ERROR), and the client itself does not stop
	// it. Settlements hold it shared; Close takes it to set closing.
	settleMu sync.RWMutex
	closing  bool

	mu   sync.Mutex
	err  error
	subs map[string]chan struct{} // consumer tag → stop signal of its forwarder

	// stuck ends the channel's connection when the broker does not answer
	// channel.close within channelCloseWait (nil: nothing to end).
	stuck func(error)

	// server is what the broker said about itself when the connection
	// opened.
	server transport.Server
}

// Server is the broker this channel is open to, as its connection.start
// named it (transport.ServerReporter).
func (c *channel) Server() transport.Server { return c.server }

// channelCloseWait bounds Close's wait for the broker's channel.close-ok.
// A broker answers in milliseconds; one that has not answered in this long
// has a wedged channel (seen on RabbitMQ 4.0 on a stream after a network
// partition: the connection still heartbeats, the close is never answered),
// and the connection is taken as lost so that it is made again.
var channelCloseWait = 15 * time.Second

func newChannel(ch *amqp.Channel) *channel {
	c := &channel{ch: ch, done: make(chan struct{}), subs: make(map[string]chan struct{})}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		e := <-closes
		c.mu.Lock()
		if e != nil {
			c.err = fromAMQPError(e)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	return c
}

// call runs one synchronous AMQP method that answers nothing but an
// error (callFor).
func (c *channel) call(ctx context.Context, f func() error) error {
	_, err := callFor(ctx, c, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// callFor runs one synchronous AMQP method and returns its answer. The
// client matches replies to requests by arrival only, so methods are
// serialised by callMu. AMQP cannot abandon a method half way: when ctx
// ends first, callFor returns ctx's error at once while the method
// finishes in the background (it may still take effect), holding callMu
// until the broker answers or the channel ends, so the next method never
// reads its reply. The answer travels back with the error, never through
// a variable f writes, so an abandoned method's late answer is dropped
// rather than read while it is written.
func callFor[T any](ctx context.Context, c *channel, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if ctx.Done() == nil {
		c.callMu.Lock()
		defer c.callMu.Unlock()
		v, err := f()
		if err != nil {
			return zero, c.cause(err)
		}
		return v, nil
	}
	type answer struct {
		v   T
		err error
	}
	res := make(chan answer, 1)
	go func() {
		c.callMu.Lock()
		defer c.callMu.Unlock()
		if ctx.Err() != nil {
			res <- answer{err: ctx.Err()}
			return
		}
		v, err := f()
		res <- answer{v, err}
	}()
	select {
	case a := <-res:
		if a.err != nil {
			return zero, c.cause(a.err)
		}
		return a.v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// cause converts err, preferring the channel's close reason (the broker's
// code and text) over the client's bare "closed".
func (c *channel) cause(err error) error {
	if err == nil {
		return nil
	}
	err = convertError(err)
	if err == transport.ErrClosed {
		select {
		case <-c.done:
			if cerr := c.Err(); cerr != nil {
				// Both: callers branch on ErrClosed, people read the cause.
				return fmt.Errorf("%w: %w", transport.ErrClosed, cerr)
			}
		default:
		}
	}
	return err
}

// DeclareExchange declares (or, when Passive, checks) an exchange.
func (c *channel) DeclareExchange(ctx context.Context, s transport.ExchangeSpec) error {
	return c.call(ctx, func() error {
		if s.Passive {
			return c.ch.ExchangeDeclarePassive(s.Name, string(s.Kind), s.Durable, s.AutoDelete, s.Internal, false, toAMQPTable(s.Args))
		}
		return c.ch.ExchangeDeclare(s.Name, string(s.Kind), s.Durable, s.AutoDelete, s.Internal, false, toAMQPTable(s.Args))
	})
}

// DeleteExchange deletes an exchange, bound or not.
func (c *channel) DeleteExchange(ctx context.Context, name string) error {
	return c.call(ctx, func() error { return c.ch.ExchangeDelete(name, false, false) })
}

// DeclareQueue declares (or, when Passive, checks) a queue and reports its
// name, ready messages and consumers.
func (c *channel) DeclareQueue(ctx context.Context, s transport.QueueSpec) (transport.QueueInfo, error) {
	q, err := callFor(ctx, c, func() (amqp.Queue, error) {
		if s.Passive {
			return c.ch.QueueDeclarePassive(s.Name, s.Durable, s.AutoDelete, s.Exclusive, false, toAMQPTable(s.Args))
		}
		return c.ch.QueueDeclare(s.Name, s.Durable, s.AutoDelete, s.Exclusive, false, toAMQPTable(s.Args))
	})
	if err != nil {
		return transport.QueueInfo{}, err
	}
	return transport.QueueInfo{Name: q.Name, Messages: q.Messages, Consumers: q.Consumers}, nil
}

// DeleteQueue deletes a queue and reports how many messages went with it.
func (c *channel) DeleteQueue(ctx context.Context, name string) (int, error) {
	return callFor(ctx, c, func() (int, error) { return c.ch.QueueDelete(name, false, false, false) })
}

// PurgeQueue removes a queue's ready messages and reports how many.
func (c *channel) PurgeQueue(ctx context.Context, name string) (int, error) {
	return callFor(ctx, c, func() (int, error) { return c.ch.QueuePurge(name, false) })
}

// BindQueue binds a queue to an exchange.
func (c *channel) BindQueue(ctx context.Context, s transport.BindingSpec) error {
	return c.call(ctx, func() error {
		return c.ch.QueueBind(s.Queue, s.RoutingKey, s.Exchange, false, toAMQPTable(s.Args))
	})
}

// UnbindQueue removes a binding.
func (c *channel) UnbindQueue(ctx context.Context, s transport.BindingSpec) error {
	return c.call(ctx, func() error {
		return c.ch.QueueUnbind(s.Queue, s.RoutingKey, s.Exchange, toAMQPTable(s.Args))
	})
}

// DeclareExchangeNoWait sends an exchange declaration without waiting for
// the broker's answer (transport.Pipeliner).
func (c *channel) DeclareExchangeNoWait(s transport.ExchangeSpec) error {
	return c.call(context.Background(), func() error {
		return c.ch.ExchangeDeclare(s.Name, string(s.Kind), s.Durable, s.AutoDelete, s.Internal, true, toAMQPTable(s.Args))
	})
}

// DeclareQueueNoWait sends a queue declaration without waiting for the
// broker's answer (transport.Pipeliner). The queue must be named.
func (c *channel) DeclareQueueNoWait(s transport.QueueSpec) error {
	if s.Name == "" {
		return fmt.Errorf("transport: a server-named queue cannot be declared without waiting for its name")
	}
	return c.call(context.Background(), func() error {
		_, err := c.ch.QueueDeclare(s.Name, s.Durable, s.AutoDelete, s.Exclusive, true, toAMQPTable(s.Args))
		return err
	})
}

// BindQueueNoWait sends a binding without waiting for the broker's answer
// (transport.Pipeliner).
func (c *channel) BindQueueNoWait(s transport.BindingSpec) error {
	return c.call(context.Background(), func() error {
		return c.ch.QueueBind(s.Queue, s.RoutingKey, s.Exchange, true, toAMQPTable(s.Args))
	})
}

// Sync waits for a basic.qos round trip (prefetch 0 is harmless on a
// declaration channel): the broker answers it only after everything sent
// before it, so a refused no-wait declaration has closed the channel by
// then, and Sync returns the broker's code and text (transport.Pipeliner).
func (c *channel) Sync(ctx context.Context) error {
	return c.call(ctx, func() error { return c.ch.Qos(0, 0, false) })
}

// Qos sets the prefetch for consumers started afterwards on this channel,
// per consumer (global=false; RabbitMQ 4 refuses global QoS).
func (c *channel) Qos(prefetch int) error {
	return c.call(context.Background(), func() error { return c.ch.Qos(prefetch, 0, false) })
}

// Ack acknowledges one delivery (multiple=false).
func (c *channel) Ack(tag uint64) error {
	return c.settle(func() error { return c.ch.Ack(tag, false) })
}

// Nack negatively acknowledges one delivery (multiple=false).
func (c *channel) Nack(tag uint64, requeue bool) error {
	return c.settle(func() error { return c.ch.Nack(tag, false, requeue) })
}

// ReleaseAll hands every delivery the channel holds unsettled back to its
// queue with one basic.nack (requeue, multiple, delivery tag 0: "every
// outstanding delivery"), in delivery order (transport.Releaser).
func (c *channel) ReleaseAll() error {
	return c.settle(func() error { return c.ch.Nack(0, true, true) })
}

// Reject rejects one delivery.
func (c *channel) Reject(tag uint64, requeue bool) error {
	return c.settle(func() error { return c.ch.Reject(tag, requeue) })
}

// settle writes one settlement unless Close has begun, in which case it
// is refused as ErrClosed (the broker returns the delivery with the
// channel, as for any settlement that did not reach it).
func (c *channel) settle(write func() error) error {
	c.settleMu.RLock()
	defer c.settleMu.RUnlock()
	if c.closing {
		return transport.ErrClosed
	}
	return c.cause(write())
}

// Done is closed when the channel has ended.
func (c *channel) Done() <-chan struct{} { return c.done }

// Err says why the channel ended: the broker's *transport.Error, or nil
// while open and after a plain Close.
func (c *channel) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the channel; unacked deliveries return to their queues.
// Closing an ended channel returns nil. When the broker does not answer
// within channelCloseWait, Close ends the channel's connection (its other
// users see it lost, and a Conn recovers it) and says so.
func (c *channel) Close() error {
	c.settleMu.Lock()
	c.closing = true
	c.settleMu.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- c.ch.Close() }()
	t := time.NewTimer(channelCloseWait)
	defer t.Stop()
	var err error
	select {
	case err = <-closed:
	case <-t.C:
		stuck := fmt.Errorf("the broker did not answer channel.close within %s; the connection is taken as lost", channelCloseWait)
		if c.stuck != nil {
			c.stuck(stuck)
		}
		// Ending the connection ends the pending close too.
		select {
		case <-closed:
		case <-time.After(loseCloseWait + time.Second):
		}
		return stuck
	}
	<-c.done
	if err != nil && convertError(err) != transport.ErrClosed {
		return convertError(err)
	}
	return nil
}
