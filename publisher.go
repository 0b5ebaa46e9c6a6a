package acemq

import (
	"context"

	"github.com/acemq-go/acemq/header"
)

// Sent is what actually went on the wire: the envelope after interceptors,
// the destination and content type, and the outcome. Its envelope id is
// the one to log.
type Sent struct {
	Envelope    Envelope
	Exchange    string
	RoutingKey  string
	ContentType string
	// Outcome is "confirmed", or "published" when confirms are off.
	Outcome Outcome
	// Mandatory is true when the publish was mandatory; it was then routed.
	Mandatory bool
}

// PublishContext is what a publish interceptor sees and may change: the
// destination, the envelope, the payload (before encoding) and the flags.
// What it leaves is what is sent and returned.
type PublishContext struct {
	Exchange   string
	RoutingKey string
	Envelope   Envelope
	Payload    any
	Persistent bool
	Mandatory  bool
}

// SetHeader sets one application header on the envelope. A reserved
// x-acemq- name is refused with the contract error and nothing is set.
func (p *PublishContext) SetHeader(name string, value any) error {
	e, err := p.Envelope.WithHeader(name, value)
	if err != nil {
		return err
	}
	p.Envelope = e
	return nil
}

// PublishInterceptor runs on every application publish (each batch member,
// requests and replies too) before encoding, on the publishing goroutine,
// concurrently: one that keeps state must be goroutine-safe. Returning an
// error (or panicking) aborts the publish: nothing is written, the outcome
// is "failed" and the error wraps the interceptor's. Interceptors do not
// run for library hops (retries, set-asides, replays, outbox relay).
type PublishInterceptor func(ctx context.Context, p *PublishContext) error

// SendOptions adjusts one send (SendWith, SendAllWith, Conn.Publish). The
// zero SendOptions sends with the publisher's settings. It is passed by
// value and read, never kept or changed, so one value may be reused by
// concurrent sends (its Headers map and Envelopes slice included).
type SendOptions struct {
	// Envelope sends with this envelope instead of building one. Missing
	// id, correlation, attempt, version and first-seen are filled in. It
	// cannot be combined with the envelope fields (Type, Version,
	// CorrelationID, CausationID, ReplyTo, Headers): the send fails.
	Envelope *Envelope
	// Envelopes gives SendAllWith one envelope per payload; a length
	// mismatch fails before anything is written.
	Envelopes []Envelope
	// Type is the envelope type (default: the routing key, or "message").
	Type string
	// Version is the payload schema version (0 means 1).
	Version int
	// CorrelationID is the correlation id (default: the message id).
	CorrelationID string
	// CausationID names the message that caused this one.
	CausationID string
	// ReplyTo is the reply address (written as AMQP reply-to and the
	// acemq-reply-to header).
	ReplyTo string
	// Headers are application headers. A reserved x-acemq- name makes the
	// send fail with the contract error before anything is written.
	Headers map[string]any
	// RoutingKey overrides the publisher's routing key when not empty.
	RoutingKey string
	// Mandatory makes this send fail with an unroutable PublishError when
	// the broker can route it to no queue.
	Mandatory bool
	// Transient sends this message with delivery mode 1: a broker restart
	// loses it.
	Transient bool
	// Priority is the AMQP priority.
	Priority uint8
	// Codec encodes this send instead of the publisher's codec.
	Codec Codec
}

// envelopeFields names the envelope fields o sets, for the error when an
// Envelope is given too.
func (o *SendOptions) envelopeFields() []string {
	var f []string
	for _, x := range []struct {
		set  bool
		name string
	}{{o.Type != "", "Type"}, {o.Version != 0, "Version"}, {o.CorrelationID != "", "CorrelationID"}, {o.CausationID != "", "CausationID"}, {o.ReplyTo != "", "ReplyTo"}, {len(o.Headers) > 0, "Headers"}} {
		if x.set {
			f = append(f, x.name)
		}
	}
	return f
}

// headerErrs returns the contract error for each reserved header name.
func (o *SendOptions) headerErrs() []error {
	var errs []error
	for name := range o.Headers {
		if len(name) >= len(header.ReservedPrefix) && name[:len(header.ReservedPrefix)] == header.ReservedPrefix {
			errs = append(errs, reservedHeaderError(name))
		}
	}
	return errs
}

// PublisherConfig configures a Publisher. The zero PublisherConfig uses
// the Conn's settings. Its fields have the names and meaning they have on
// SendOptions, which overrides them per send.
type PublisherConfig struct {
	// Codec is the publisher's codec (nil: the Conn's).
	Codec Codec
	// Mandatory makes every send of this publisher mandatory.
	Mandatory bool
	// Transient makes every send of this publisher transient.
	Transient bool
}

type publisherConfig struct {
	codec     Codec
	mandatory bool
	transient bool
}

func (c PublisherConfig) internal() publisherConfig {
	return publisherConfig{codec: c.Codec, mandatory: c.Mandatory, transient: c.Transient}
}

// Publisher sends payloads of type T to one destination. Building one
// opens nothing and registers nothing; keep one per message type. It is
// safe for concurrent use: concurrent Sends pipeline.
type Publisher[T any] struct {
	c          *Conn
	exchange   string
	routingKey string
	cfg        publisherConfig
}

// NewPublisher returns a publisher for exchange and routing key ("" and a
// queue name publish straight to that queue).
func NewPublisher[T any](c *Conn, exchange, routingKey string, cfg PublisherConfig) *Publisher[T] {
	return &Publisher[T]{c: c, exchange: exchange, routingKey: routingKey, cfg: cfg.internal()}
}

// Send publishes one payload and returns once the broker has confirmed it
// (outcome "confirmed"), with what went on the wire. With
// Config.NoPublisherConfirms a send that is not mandatory returns once it is
// written (outcome "published"): nothing says the broker has it. Every failure is a *PublishError (errors.As):
// a *PublishingPausedError when it was refused unsent (blocked or
// recovering; safe to retry), Unroutable when a mandatory message reached
// no queue, and otherwise a failure that may have arrived. Send is safe
// for concurrent use and never holds a lock while waiting for the broker.
func (p *Publisher[T]) Send(ctx context.Context, payload T) (Sent, error) {
	return p.c.pub.send(ctx, p.exchange, p.routingKey, &p.cfg, payload, &noSendOptions)
}

// SendWith is Send with per-send options, which override the publisher's.
func (p *Publisher[T]) SendWith(ctx context.Context, payload T, o SendOptions) (Sent, error) {
	return p.c.pub.send(ctx, p.exchange, p.routingKey, &p.cfg, payload, &o)
}

// SendAll publishes payloads pipelined: every message is written (in waves
// within the outstanding ceiling) before confirms are awaited, and every
// message is awaited even after a failure, so the counts are real. Results
// come back in payload order. It is not atomic. If any message failed the
// error is a *BatchPublishError carrying every result; it counts as paused
// only when every failure was a refusal, and unroutable only when every
// failure was unroutable.
func (p *Publisher[T]) SendAll(ctx context.Context, payloads []T) ([]Sent, error) {
	return p.SendAllWith(ctx, payloads, SendOptions{})
}

// SendAllWith is SendAll with options applied to every member;
// o.Envelopes gives each member its own envelope.
func (p *Publisher[T]) SendAllWith(ctx context.Context, payloads []T, o SendOptions) ([]Sent, error) {
	return p.c.pub.sendAll(ctx, p.exchange, p.routingKey, &p.cfg, len(payloads), func(i int) any { return payloads[i] }, &o)
}

// Publish sends one payload with the Conn's codec to exchange and routing
// key. It behaves as Publisher.SendWith; the zero SendOptions sends with
// the Conn's settings.
func (c *Conn) Publish(ctx context.Context, exchange, routingKey string, payload any, o SendOptions) (Sent, error) {
	return c.pub.send(ctx, exchange, routingKey, &publisherConfig{}, payload, &o)
}

// noSendOptions is what Send passes: nothing to override.
var noSendOptions SendOptions
