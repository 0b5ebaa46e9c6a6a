package acemq

import (
	"context"
	"fmt"
	"sync"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// ReadEnvelope applies the contract's tolerant read rules to a message's
// headers and properties, as a consumer does. It never fails: a message
// with no AceMQ headers reads as attempt 1, version 1, type from the
// routing key.
func ReadEnvelope(headers map[string]any, routingKey, messageID, replyTo string) Envelope {
	return readEnvelope(transport.Table(headers), routingKey, messageID, replyTo)
}

// WireHeaders renders the envelope as the headers a publish puts on the
// wire: the engine's x-acemq-* headers and the application headers.
func (e Envelope) WireHeaders() map[string]any { return e.render() }

// RawMessage is a message whose bytes are final: stored by an outbox,
// taken from a dead-letter queue, or built by a pattern. PublishRaw sends
// it as it is.
type RawMessage struct {
	Exchange    string
	RoutingKey  string
	ContentType string
	// MessageID is the AMQP message_id property; at most 255 bytes, else
	// the publish is refused (transport.ErrShortString). One that is the
	// id in Headers' x-acemq-id and longer than that is left out instead:
	// the header carries it whole (a message forwarded from another
	// client can have such an id).
	MessageID string
	// CorrelationID is the AMQP correlation-id property ("" for none).
	CorrelationID string
	ReplyTo       string
	Headers       map[string]any
	Body          []byte
	Priority      uint8
	// Transient sends with delivery mode 1 (default persistent).
	Transient bool
	// NotMandatory turns mandatory off (default on, as for every library
	// hop; replies are the one exception).
	NotMandatory bool
}

// PublishRaw publishes m as a library hop: bytes, content type and headers
// unchanged, no interceptors, mandatory unless NotMandatory, persistent
// unless Transient, and confirmed even when application confirms are off.
// It waits out a broker block or a recovery within ctx. It returns nil only
// once the broker confirmed (and, when mandatory, routed) the message; the
// error is a *PublishError as for Send. Patterns (outbox relay, replay,
// replies) publish through it; it does not count in acemq.publish.total.
func (c *Conn) PublishRaw(ctx context.Context, m RawMessage) error {
	msg := m.message()
	if err := c.pub.bodyRefusal(msg); err != nil {
		return err
	}
	return c.pub.hop(ctx, msg)
}

// Pulled is one message taken with basic.get and not yet settled. Settle it
// with Ack or Nack; closing its Puller returns unsettled ones to the queue.
// A Pulled no Puller took (one replay.Browse hands to its visit function)
// cannot be settled: Ack and Nack return an error.
type Pulled struct {
	Envelope    Envelope
	Queue       string
	Exchange    string
	RoutingKey  string
	ContentType string
	ReplyTo     string
	// MessageID is the AMQP message-id property as received; "" when the
	// publisher set none (Envelope.ID is then the x-acemq-id header, or a
	// fresh random id made for this read).
	MessageID string
	// CorrelationID is the AMQP correlation-id property as received ("" for
	// none); AceMQ's own correlation is Envelope.CorrelationID.
	CorrelationID string
	// Headers are every header as received, engine headers included.
	Headers     map[string]any
	Body        []byte
	Redelivered bool
	// Remaining is the number of messages left in the queue after this one.
	Remaining int
	Priority  uint8

	p   *Puller
	tag uint64
}

// Ack removes the message from its queue.
func (m *Pulled) Ack() error {
	return m.settle(func(ch transport.Channel) error { return ch.Ack(m.tag) })
}

// Nack returns the message to its queue (requeue) or drops it to the
// queue's dead-letter exchange.
func (m *Pulled) Nack(requeue bool) error {
	return m.settle(func(ch transport.Channel) error { return ch.Nack(m.tag, requeue) })
}

// Raw returns the message as a RawMessage addressed to exchange and key,
// with its bytes, content type, id, reply-to and headers unchanged (the
// broker's own x-death family dropped). An id longer than the 255 bytes of
// an AMQP message_id property travels in the x-acemq-id header only.
func (m *Pulled) Raw(exchange, routingKey string) RawMessage {
	h := make(map[string]any, len(m.Headers))
	for k, v := range m.Headers {
		if !brokerOwned(k) {
			h[k] = v
		}
	}
	return RawMessage{
		Exchange: exchange, RoutingKey: routingKey, ContentType: m.ContentType,
		MessageID: messageIDProperty(m.Envelope.ID), CorrelationID: m.CorrelationID, ReplyTo: m.ReplyTo, Headers: h, Body: m.Body, Priority: m.Priority,
	}
}

// Puller takes messages one at a time with basic.get on a channel of its
// own. It is safe for concurrent use. It does not survive a recovery: a
// lost connection returns its unsettled messages to their queues.
type Puller struct {
	c       *Conn
	mu      sync.Mutex
	ch      transport.Channel
	pending map[uint64]bool
}

// NewPuller opens a puller on the consuming connection.
func (c *Conn) NewPuller(ctx context.Context) (*Puller, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return nil, err
	}
	return &Puller{c: c, ch: ch, pending: map[uint64]bool{}}, nil
}

// Pull takes one message from queue; ok is false when the queue is empty.
// A missing queue is an error carrying the broker's 404.
func (p *Puller) Pull(ctx context.Context, queue string) (*Pulled, bool, error) {
	p.mu.Lock()
	ch := p.ch
	p.mu.Unlock()
	d, ok, err := ch.Get(ctx, queue)
	if err != nil {
		return nil, false, fmt.Errorf("acemq: cannot take a message from %q: %w", queue, err)
	}
	if !ok {
		return nil, false, nil
	}
	p.mu.Lock()
	p.pending[d.DeliveryTag] = true
	p.mu.Unlock()
	return &Pulled{
		Envelope:      readEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.ReplyTo),
		Queue:         queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		ReplyTo:       d.ReplyTo,
		MessageID:     d.MessageID,
		CorrelationID: d.CorrelationID,
		Headers:       map[string]any(d.Headers),
		Body:          d.Body,
		Redelivered:   d.Redelivered,
		Remaining:     d.MessageCount,
		Priority:      d.Priority,
		p:             p,
		tag:           d.DeliveryTag,
	}, true, nil
}

// settle runs f on the channel m was taken on, once. A Pulled that no
// Puller took (a copy made by a caller, or one handed to replay.Browse's
// visit) is refused with an error rather than a panic.
func (m *Pulled) settle(f func(transport.Channel) error) error {
	if m.p == nil {
		return fmt.Errorf("acemq: message %s was not taken by a Puller, so it cannot be settled here; a message read by a browse goes back to its queue when the read ends", idtext.Short(m.Envelope.ID))
	}
	return m.p.settle(m, f)
}

func (p *Puller) settle(m *Pulled, f func(transport.Channel) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending[m.tag] {
		return fmt.Errorf("acemq: message %s was already settled", idtext.Short(m.Envelope.ID))
	}
	delete(p.pending, m.tag)
	return f(p.ch)
}

// Close returns every unsettled message to its queue and closes the channel.
func (p *Puller) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = map[uint64]bool{}
	return p.ch.Close()
}

// QueueInfo asks the broker about a queue (passive declare on a throwaway
// channel): ready messages and consumers. A missing queue is an error
// carrying the broker's 404.
func (c *Conn) QueueInfo(ctx context.Context, queue string) (transport.QueueInfo, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return transport.QueueInfo{}, err
	}
	defer ch.Close()
	info, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: queue, Passive: true})
	if err != nil {
		return info, fmt.Errorf("acemq: cannot inspect queue %q: %w", queue, err)
	}
	return info, nil
}

// PurgeQueue removes every ready message from queue and returns how many.
func (c *Conn) PurgeQueue(ctx context.Context, queue string) (int, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	n, err := ch.PurgeQueue(ctx, queue)
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot purge queue %q: %w", queue, err)
	}
	return n, nil
}

// DeleteQueue deletes queue and returns how many messages it held.
func (c *Conn) DeleteQueue(ctx context.Context, queue string) (int, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	n, err := ch.DeleteQueue(ctx, queue)
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot delete queue %q: %w", queue, err)
	}
	return n, nil
}
