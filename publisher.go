package acemq

import (
	"context"
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

// SendOption adjusts one Send or SendAll.
type SendOption func(*sendOptions)

type sendOptions struct {
	env        *Envelope
	envs       []Envelope
	fieldsSet  []string
	typ        string
	version    int
	corr       string
	cause      string
	replyTo    string
	headers    map[string]any
	headerErrs []error
	key        *string
	mandatory  *bool
	persistent *bool
	priority   uint8
	codec      Codec
}

func (o *sendOptions) field(name string) { o.fieldsSet = append(o.fieldsSet, name) }

// WithEnvelope sends with this envelope instead of building one. Missing
// id, correlation, attempt, version and first-seen are filled in. It cannot
// be combined with the envelope-field options (WithType, WithHeader, …).
func WithEnvelope(e Envelope) SendOption { return func(o *sendOptions) { o.env = &e } }

// WithBatchEnvelopes gives SendAll one envelope per payload; a length
// mismatch fails before anything is written.
func WithBatchEnvelopes(envs []Envelope) SendOption { return func(o *sendOptions) { o.envs = envs } }

// WithType sets the envelope type (default: the routing key, or "message").
func WithType(t string) SendOption {
	return func(o *sendOptions) { o.typ = t; o.field("WithType") }
}

// WithVersion sets the payload schema version (default 1).
func WithVersion(v int) SendOption {
	return func(o *sendOptions) { o.version = v; o.field("WithVersion") }
}

// WithCorrelationID sets the correlation id (default: the message id).
func WithCorrelationID(id string) SendOption {
	return func(o *sendOptions) { o.corr = id; o.field("WithCorrelationID") }
}

// WithCausationID names the message that caused this one.
func WithCausationID(id string) SendOption {
	return func(o *sendOptions) { o.cause = id; o.field("WithCausationID") }
}

// WithReplyTo sets the reply address (written as AMQP reply-to and the
// acemq-reply-to header).
func WithReplyTo(addr string) SendOption {
	return func(o *sendOptions) { o.replyTo = addr; o.field("WithReplyTo") }
}

// WithHeader sets one application header. A reserved x-acemq- name makes
// the send fail with the contract error before anything is written.
func WithHeader(name string, value any) SendOption {
	return func(o *sendOptions) {
		o.field("WithHeader")
		if len(name) >= len(ReservedPrefix) && name[:len(ReservedPrefix)] == ReservedPrefix {
			o.headerErrs = append(o.headerErrs, reservedHeaderError(name))
			return
		}
		if o.headers == nil {
			o.headers = map[string]any{}
		}
		o.headers[name] = value
	}
}

// WithRoutingKey overrides the publisher's routing key for this send.
func WithRoutingKey(key string) SendOption { return func(o *sendOptions) { o.key = &key } }

// Mandatory makes this send fail with an unroutable PublishError when the
// broker can route it to no queue.
func Mandatory() SendOption { t := true; return func(o *sendOptions) { o.mandatory = &t } }

// Transient sends this message with delivery mode 1: a broker restart
// loses it.
func Transient() SendOption { f := false; return func(o *sendOptions) { o.persistent = &f } }

// WithPriority sets the AMQP priority.
func WithPriority(p uint8) SendOption { return func(o *sendOptions) { o.priority = p } }

// WithSendCodec encodes this send with c instead of the publisher's codec.
func WithSendCodec(c Codec) SendOption { return func(o *sendOptions) { o.codec = c } }

// PublisherOption configures a Publisher.
type PublisherOption func(*publisherConfig)

type publisherConfig struct {
	codec     Codec
	mandatory bool
	transient bool
}

// PublisherCodec sets the publisher's codec (default: the Conn's).
func PublisherCodec(c Codec) PublisherOption { return func(p *publisherConfig) { p.codec = c } }

// PublisherMandatory makes every send of this publisher mandatory.
func PublisherMandatory() PublisherOption { return func(p *publisherConfig) { p.mandatory = true } }

// PublisherTransient makes every send of this publisher transient.
func PublisherTransient() PublisherOption { return func(p *publisherConfig) { p.transient = true } }

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
func NewPublisher[T any](c *Conn, exchange, routingKey string, opts ...PublisherOption) *Publisher[T] {
	p := &Publisher[T]{c: c, exchange: exchange, routingKey: routingKey}
	for _, o := range opts {
		o(&p.cfg)
	}
	return p
}

// Send publishes one payload and returns once the broker has confirmed it
// (outcome "confirmed"), with what went on the wire. With
// WithoutPublisherConfirms a send that is not mandatory returns once it is
// written (outcome "published"): nothing says the broker has it. Every failure is a *PublishError (errors.As):
// a *PublishingPausedError when it was refused unsent (blocked or
// recovering; safe to retry), Unroutable when a mandatory message reached
// no queue, and otherwise a failure that may have arrived. Send is safe
// for concurrent use and never holds a lock while waiting for the broker.
func (p *Publisher[T]) Send(ctx context.Context, payload T, opts ...SendOption) (Sent, error) {
	return p.c.pub.send(ctx, p.exchange, p.routingKey, &p.cfg, payload, opts)
}

// SendAll publishes payloads pipelined: every message is written (in waves
// within the outstanding ceiling) before confirms are awaited, and every
// message is awaited even after a failure, so the counts are real. Results
// come back in payload order. It is not atomic. If any message failed the
// error is a *BatchPublishError carrying every result; it counts as paused
// only when every failure was a refusal, and unroutable only when every
// failure was unroutable.
func (p *Publisher[T]) SendAll(ctx context.Context, payloads []T, opts ...SendOption) ([]Sent, error) {
	anys := make([]any, len(payloads))
	for i := range payloads {
		anys[i] = payloads[i]
	}
	return p.c.pub.sendAll(ctx, p.exchange, p.routingKey, &p.cfg, anys, opts)
}

// Publish sends one payload with the Conn's codec to exchange and routing
// key. It behaves as Publisher.Send.
func (c *Conn) Publish(ctx context.Context, exchange, routingKey string, payload any, opts ...SendOption) (Sent, error) {
	return c.pub.send(ctx, exchange, routingKey, &publisherConfig{}, payload, opts)
}
