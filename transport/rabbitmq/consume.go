package rabbitmq

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// Consume subscribes with manual acknowledgement. Deliveries arrive on the
// returned channel, fed by one forwarding goroutine that closes it when the
// subscription is cancelled (by Cancel or by the broker) or the channel
// ends. An empty spec.Tag lets the client choose one.
func (c *channel) Consume(ctx context.Context, s transport.ConsumeSpec) (<-chan transport.Delivery, error) {
	in, tag, err := c.subscribe(ctx, s)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	c.mu.Lock()
	c.subs[tag] = stop
	c.mu.Unlock()
	// Buffered, so the forwarder runs ahead and the reader drains in
	// batches instead of a rendezvous per delivery. The broker's prefetch
	// still bounds what is held.
	out := make(chan transport.Delivery, forwardBuffer)
	go c.forward(in, out, stop, tag)
	return out, nil
}

func (c *channel) forward(in <-chan amqp.Delivery, out chan<- transport.Delivery, stop chan struct{}, tag string) {
	defer func() {
		close(out)
		c.mu.Lock()
		if c.subs[tag] == stop {
			delete(c.subs, tag)
		}
		c.mu.Unlock()
	}()
	for d := range in {
		select {
		case out <- toDelivery(&d, 0):
		case <-stop:
			return
		case <-c.done:
			return
		}
	}
}

// Cancel stops a subscription; its delivery channel closes and deliveries
// already handed over stay unacked until settled or the channel closes.
func (c *channel) Cancel(ctx context.Context, tag string) error {
	err := c.call(ctx, func() error { return c.ch.Cancel(tag, false) })
	c.mu.Lock()
	if stop, ok := c.subs[tag]; ok {
		close(stop)
		delete(c.subs, tag)
	}
	c.mu.Unlock()
	return err
}

// Get pulls one message with manual acknowledgement; ok is false when the
// queue is empty.
func (c *channel) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	type got struct {
		d  amqp.Delivery
		ok bool
	}
	g, err := callFor(ctx, c, func() (got, error) {
		d, ok, err := c.ch.Get(queue, false)
		return got{d, ok}, err
	})
	if err != nil || !g.ok {
		return transport.Delivery{}, false, err
	}
	return toDelivery(&g.d, int(g.d.MessageCount)), true, nil
}

func toDelivery(d *amqp.Delivery, count int) transport.Delivery {
	return transport.Delivery{
		Properties: transport.Properties{
			ContentType:   d.ContentType,
			MessageID:     d.MessageId,
			CorrelationID: d.CorrelationId,
			ReplyTo:       d.ReplyTo,
			DeliveryMode:  d.DeliveryMode,
			Priority:      d.Priority,
			Headers:       fromAMQPTable(d.Headers),
		},
		Body:         d.Body,
		Exchange:     d.Exchange,
		RoutingKey:   d.RoutingKey,
		Redelivered:  d.Redelivered,
		DeliveryTag:  d.DeliveryTag,
		ConsumerTag:  d.ConsumerTag,
		MessageCount: count,
	}
}

// forwardBuffer is how many converted deliveries may wait for the
// subscriber.
const forwardBuffer = 256

// ConsumeDirect subscribes like Consume but converts each delivery on the
// subscriber's goroutine, with no forwarding goroutine in between. The
// client closes its delivery channel on cancel and when the channel ends,
// which is when next reports false.
func (c *channel) ConsumeDirect(ctx context.Context, s transport.ConsumeSpec) (func() (transport.Delivery, bool), error) {
	in, _, err := c.subscribe(ctx, s)
	if err != nil {
		return nil, err
	}
	return func() (transport.Delivery, bool) {
		d, ok := <-in
		if !ok {
			return transport.Delivery{}, false
		}
		return toDelivery(&d, 0), true
	}, nil
}

// subscribe starts a manual-ack subscription on the channel and returns its
// tag: spec.Tag, or one of the client's choosing when that is empty.
func (c *channel) subscribe(ctx context.Context, s transport.ConsumeSpec) (<-chan amqp.Delivery, string, error) {
	tag := s.Tag
	if tag == "" {
		tag = uniqueTag()
	}
	in, err := callFor(ctx, c, func() (<-chan amqp.Delivery, error) {
		return c.ch.Consume(s.Queue, tag, false, s.Exclusive, false, false, toAMQPTable(s.Args))
	})
	if err != nil {
		return nil, "", err
	}
	return in, tag, nil
}
