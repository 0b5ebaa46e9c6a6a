package acemq

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

type decisionKind uint8

const (
	decNone decisionKind = iota
	decAccept
	decRetry
	decReject
	decPark
	decInProgress
)

// Decision is what a handler answers for one delivery. The engine carries
// it out: the handler never acks, requeues or republishes by itself. The
// zero Decision is not an answer: it rejects the message with the reason
// "the handler returned no decision", never a silent accept.
type Decision struct {
	kind  decisionKind
	err   error
	delay time.Duration
}

// Accept acknowledges the message: it was handled.
func Accept() Decision { return Decision{kind: decAccept} }

// Retry asks for another attempt under the consumer's retry policy. When
// attempts or age run out the message is dead-lettered to {q}.dlq with the
// reason; an err marked with Fatal dead-letters at once.
func Retry(err error) Decision { return Decision{kind: decRetry, err: err} }

// Reject dead-letters the message to {q}.dlq at once, with err as reason.
func Reject(err error) Decision { return Decision{kind: decReject, err: err} }

// Park sets the message aside in {q}.parked for a person to look at.
func Park(err error) Decision { return Decision{kind: decPark, err: err} }

// InProgress puts the message back on its queue after delay (≤ 0: 5s)
// with the same attempt number: someone else is working on it. The retry
// policy is not consulted and it is never dead-lettered for this.
func InProgress(delay time.Duration) Decision {
	if delay <= 0 {
		delay = inProgressDelay
	}
	return Decision{kind: decInProgress, delay: delay}
}

// Err is the error the decision carries, if any.
func (d Decision) Err() error { return d.err }

// String names the decision: accept, retry, reject, park, in_progress,
// release.
func (d Decision) String() string {
	switch d.kind {
	case decAccept:
		return "accept"
	case decRetry:
		return "retry"
	case decReject:
		return "reject"
	case decPark:
		return "park"
	case decInProgress:
		return "in_progress"
	case decRelease:
		return "release"
	}
	return "none"
}

// Message is one delivery handed to a handler: the envelope, the decoded
// payload and what the broker said about it.
type Message[T any] struct {
	Envelope    Envelope
	Payload     T
	Queue       string
	Exchange    string
	RoutingKey  string
	ContentType string
	// Body is the raw body; do not modify it.
	Body []byte
	// Redelivered is the broker's "may have been delivered before" flag.
	// It is never a reason to skip work: only the envelope id identifies a
	// duplicate.
	Redelivered bool
	// DeliveryCount is how many times a quorum queue delivered the message
	// before and got it back, however it came back (a reject or nack with
	// requeue, a channel or connection lost with it unacked); 0 on a first
	// delivery and on other queue types. It is the broker's
	// x-delivery-count on RabbitMQ 3.10 to 4.2 and x-acquired-count on 4.3,
	// whose x-delivery-count counts only the returns that count toward the
	// delivery limit (rejects and lost channels, not nacks); that one stays
	// readable as Envelope.Header("x-delivery-count"). Informational only:
	// the engine decides nothing on it.
	DeliveryCount int
}

// Handler handles one message and returns its decision. It runs on one of
// the consumer's concurrency goroutines with a context that is cancelled
// when the delivery can no longer be settled (its channel closed) or the
// drain deadline passed. A panic is recovered and rejects the message.
type Handler[T any] func(ctx context.Context, m *Message[T]) Decision

// Inbound is what a consume interceptor sees before decoding. It may
// change the envelope (the handler and set-aside copies see the change);
// body changes are ignored.
type Inbound struct {
	Queue       string
	Exchange    string
	RoutingKey  string
	ContentType string
	Body        []byte
	Redelivered bool
	Envelope    Envelope
}

// ConsumeInterceptor runs on every delivery before decoding, in
// registration order. An error (or panic) refuses the message: it is set
// aside to {q}.dlq with the reason "an interceptor refused it: …" (outcome
// dead_lettered), unless the error is marked Retryable, which takes the
// retry path instead.
type ConsumeInterceptor func(ctx context.Context, in *Inbound) error

// ConsumerConfig configures one consumer. The zero ConsumerConfig works:
// a zero field takes the Conn's setting (Config's field of the same name)
// or the default its comment gives.
type ConsumerConfig struct {
	// Prefetch is the consumer's basic.qos window (0: the Conn's, 20).
	// Unlimited prefetch is refused: a negative value is a
	// ConfigurationError.
	Prefetch int
	// Concurrency is how many handlers really run at once (0 means 1);
	// 1 ≤ Concurrency ≤ Prefetch. Ordering between messages is not kept
	// when it is above 1.
	Concurrency int
	// Retry is the consumer's retry policy (the zero policy: the Conn's;
	// give NoRetry() to override a Conn policy with none).
	Retry RetryPolicy
	// Codec decodes bodies (nil: the Conn's). A Composite picks a member
	// by content type.
	Codec Codec
	// KeyOrder makes deliveries that share a key run one at a time, in
	// the order they arrived, while deliveries with different keys run in
	// parallel on the consumer's Concurrency workers (behaviour §7.10, the
	// in-process per-key wrapper; package ordered builds on it). It is
	// called once per delivery on the consumer's reading goroutine, before
	// any interceptor, and must be fast and goroutine-safe; a delivery
	// whose key is "" is unordered and goes to any free worker. Each key
	// is bound to one worker (FNV-1a of the key modulo the concurrency),
	// so a slow message also holds back the other keys bound to its
	// worker, and the order holds within one consumer only: a redelivery
	// after a recovery or a retry through the broker comes back later,
	// behind newer messages. nil leaves the consumer unordered.
	KeyOrder func(in Inbound) string
	// Tag is the consumer tag (default acemq-{queue}-{8 hex}, generated
	// once and kept across recoveries).
	Tag string
	// Args are basic.consume arguments.
	Args transport.Table
	// ArgsAt computes basic.consume arguments afresh on every subscribe:
	// the first one and each one after a recovery. A stream reader uses
	// it to resume at its own position (x-stream-offset) rather than where
	// it first started. It runs on the goroutine that subscribes, never
	// concurrently with itself, and must not block; it overrides Args.
	ArgsAt func() transport.Table
	// OnStream marks the consumer as reading a stream, where RabbitMQ has
	// no nack or reject (it closes the connection with 540): wherever the
	// engine would hand a delivery back (a drain) it acks instead, which
	// on a stream only returns credit. The reader keeps its own position,
	// so nothing is lost; the stream package sets this, and a consumer of
	// a queue its Conn declared as a stream (QueueOptions{Type: Stream})
	// gets it without asking. A delivery that could not be set aside at
	// all (its copy and the minimal copy in {q}.parked both refused) is
	// not settled as handled: with OnSetAsideFailed set, the engine tells
	// it and then acks, which only returns credit (the hook's owner keeps
	// the position there); without it, the engine closes the consumer's
	// channel, so no message after it is handled, and subscribes again
	// with back-off, with ArgsAt deciding where.
	OnStream bool
	// OnSetAsideFailed, when set, is told that a message could not be set
	// aside (a rejected, parked or dead-lettered message's copy to
	// {q}.dlq or {q}.parked, an unreadable message's included, and the
	// minimal copy in {q}.parked after it were both refused): called with
	// the Fallback of the last copy refused (Kind "set_aside_failed") on
	// the worker that settled the delivery, before that worker takes
	// another, and before the engine's last resort for it (which, on a
	// stream, is an ack that only returns credit: the message is neither
	// handled nor set aside, and whoever keeps the position must not move
	// past it; the stream package holds its reader there). A copy refused
	// and then made as a minimal copy is set aside, so not reported here
	// (Config.OnFallback sees each refusal). It must not block for long.
	OnSetAsideFailed func(Fallback)
	// ConsumeInterceptors run for this consumer, after the Conn's.
	ConsumeInterceptors []ConsumeInterceptor
	// DrainTimeout is the deadline this consumer's Close spends draining
	// (0: the Conn's; a negative value means do not wait).
	DrainTimeout time.Duration
	// DecodeTimeout is how long decoding one delivery may take (0 means
	// 30s; a negative value means no deadline of its own, only the
	// delivery's). The deadline reaches codecs that implement
	// ContextDecoder, such as a claim-check codec reading its store; a
	// decode that runs out of time is retryable (the retry path, never
	// parked), because the store or registry may answer next time.
	DecodeTimeout time.Duration
	// NoDeadLetterDeclaration stops the consumer declaring its dead-letter
	// half and retry ladder at start, for topologies an operator owns.
	// The queues must then exist, or set-asides fail.
	NoDeadLetterDeclaration bool
	// SingleActive says the queue was declared with
	// x-single-active-consumer (the engine does not read a queue's
	// arguments), and makes Close hand over in the queue's order. On
	// Close the messages in hand finish and are settled, nothing further
	// is started, and the subscription ends by closing its channel, with
	// no basic.cancel first: the broker then returns every unsettled
	// message (those prefetched and never started, and any a handler gave
	// back with Release) in delivery order before it activates the next
	// waiting consumer, which so gets them before anything newer. A
	// basic.cancel would activate that consumer at once, with the messages
	// the closing one never prefetched, ahead of those it hands back. A
	// handler still running at the drain deadline (Close's context or
	// DrainTimeout) has its context cancelled and a short grace to return,
	// as for every consumer; then the channel closes anyway, its message
	// goes back with the rest, and Close reports it in a
	// *DrainTimeoutError. Until the channel closes the broker may deliver
	// more into the prefetch window; those are not started and go back
	// with it. It costs nothing on a queue without the argument beyond
	// that hold; on a stream (OnStream) it is ignored. Packages ordered
	// and group set it for their single-active-consumer queues.
	SingleActive bool
}

type consumerConfig struct {
	prefetch     int
	concurrency  int
	policy       *RetryPolicy
	codec        Codec
	tag          string
	args         transport.Table
	argsAt       func() transport.Table  // see ConsumerArgsAt
	orderKey     func(in Inbound) string // see ConsumerKeyOrder
	stream       bool                    // see ConsumerOnStream
	asideFailed  func(Fallback)          // see ConsumerConfig.OnSetAsideFailed
	skipDecl     bool
	singleActive bool // see ConsumerConfig.SingleActive
	interceptors []ConsumeInterceptor
	drain        *time.Duration
	// decodeTimeout is set by ConsumerDecodeTimeout (codec_context.go).
	decodeTimeout *time.Duration
}

// internal lays cfg over the Conn's settings.
func (cfg ConsumerConfig) internal(c *Conn) consumerConfig {
	k := consumerConfig{prefetch: c.cfg.prefetch, concurrency: 1, codec: cfg.Codec, tag: cfg.Tag, args: cfg.Args, argsAt: cfg.ArgsAt, orderKey: cfg.KeyOrder, stream: cfg.OnStream, asideFailed: cfg.OnSetAsideFailed, skipDecl: cfg.NoDeadLetterDeclaration, singleActive: cfg.SingleActive, interceptors: cfg.ConsumeInterceptors}
	if cfg.Prefetch != 0 {
		k.prefetch = cfg.Prefetch
	}
	if cfg.Concurrency != 0 {
		k.concurrency = cfg.Concurrency
	}
	if cfg.Retry != (RetryPolicy{}) {
		p := cfg.Retry
		k.policy = &p
	}
	k.drain = overrideOrNone(cfg.DrainTimeout)
	k.decodeTimeout = overrideOrNone(cfg.DecodeTimeout)
	return k
}

// Consumer is a running subscription. Close drains it.
type Consumer struct {
	core *consumerCore
}

// Queue is the queue consumed.
func (k *Consumer) Queue() string { return k.core.queue }

// Tag is the consumer tag, stable across recoveries.
func (k *Consumer) Tag() string { return k.core.tag }

// Stalled reports why the consumer is not reading now (the broker
// cancelled its subscription, its queue vanished during a recovery, or
// recovery gave up), or nil while it reads. A stalled consumer keeps
// trying to re-subscribe with back-off until it works or is closed.
func (k *Consumer) Stalled() error { return k.core.stalledErr() }

// InFlight is the number of deliveries received and not yet settled.
func (k *Consumer) InFlight() int { return int(k.core.inFlight.Load()) }

// Close stops the consumer: no new deliveries, prefetched but unstarted
// ones go back to the broker unrun, running handlers finish within the
// drain deadline (the consumer's drain timeout, or ctx's earlier deadline),
// then the channel is released. A consumer with
// ConsumerConfig.SingleActive subscribed until its channel closes and
// hands back by closing it, in the queue's order. It returns nil or a
// *DrainTimeoutError. Idempotent.
func (k *Consumer) Close(ctx context.Context) error {
	timeout := k.core.drainTimeout
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		// The error names the deadline actually used, not the configured one.
		deadline = d
		timeout = time.Until(d).Round(time.Millisecond)
	}
	err := drainAll(ctx, []*consumerCore{k.core}, deadline, timeout)
	if ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	return err
}

// Consume subscribes handler h to queue and returns once the subscription
// is live. The queue must exist (the consumer never declares it); before
// subscribing the consumer declares its dead-letter half ({q}.dlq,
// {q}.parked, acemq.dlx and the bindings) and, when its retry policy waits
// on broker rungs, the retry ladder. A policy that holds its waits in the
// queue (RetryWaits) hands a failed delivery back to the queue instead,
// which holds it; Consume fails for WaitsInQueue on a broker without
// delayed retry. Every delivery is settled by the engine
// from h's Decision; see Decision for what each one does.
func Consume[T any](ctx context.Context, c *Conn, queue string, h Handler[T], config ConsumerConfig) (*Consumer, error) {
	cfg := config.internal(c)
	policy := c.cfg.retry
	if cfg.policy != nil {
		policy = *cfg.policy
	}
	codec := c.cfg.codec
	if cfg.codec != nil {
		codec = cfg.codec
	}
	switch {
	case h == nil:
		return nil, configErr("handler", "the handler is nil")
	case queue == "":
		return nil, configErr("queue", "the queue name is empty")
	case cfg.prefetch < 1:
		return nil, configErr("ConsumerConfig.Prefetch", "prefetch %d is below 1; unlimited prefetch is refused", cfg.prefetch)
	case cfg.concurrency < 1 || cfg.concurrency > cfg.prefetch:
		return nil, configErr("ConsumerConfig.Concurrency", "concurrency %d must be between 1 and the prefetch (%d)", cfg.concurrency, cfg.prefetch)
	}
	if err := cfg.checkDecodeTimeout(); err != nil {
		return nil, err
	}
	if err := policy.Err(); err != nil {
		return nil, err
	}
	if err := policy.rungCollision(queue); err != nil {
		return nil, err
	}
	if c.State() == StateClosed || c.State() == StateClosing {
		return nil, ErrClosed
	}
	tag := cfg.tag
	if tag == "" {
		tag = "acemq-" + queue + "-" + randomHex(4)
	}
	drainTimeout := c.cfg.drainTimeout
	if cfg.drain != nil {
		drainTimeout = *cfg.drain
	}
	icpt := append(append([]ConsumeInterceptor(nil), c.cfg.consumeIcpt...), cfg.interceptors...)
	inQueue, err := c.consumerWaitsInQueue(queue, policy)
	if err != nil {
		return nil, err
	}
	k := newConsumerCore(c, c.consumerEnv(), queue, tag, cfg.prefetch, cfg.concurrency, policy, cfg.args, drainTimeout, cfg.orderKey)
	// A queue this Conn declared as a stream is read as one even without
	// ConsumerConfig.OnStream: RabbitMQ answers a nack on a stream (a drain hands
	// back what it never started) by closing the whole connection (540).
	k.argsAt, k.stream = cfg.argsAt, cfg.stream || c.decls.asStream(queue)
	k.waitsInQueue = inQueue
	k.singleActive = cfg.singleActive && !k.stream
	if inQueue && k.stream {
		k.stopWorkers()
		return nil, configErr("RetryPolicy", "the policy holds the waits of %q in the queue, but it is read as a stream, which holds no waits; use WaitsOnRungs", queue)
	}
	k.asideFailed = cfg.asideFailed
	// The handler's Message comes in the delivery's own allocation.
	type typedDelivery struct {
		dv delivery
		m  Message[T]
	}
	k.newDelivery = func() *delivery {
		td := new(typedDelivery)
		td.dv.msg = &td.m
		return &td.dv
	}
	k.process = func(dv *delivery) {
		k.handle(dv, icpt, func(ctx context.Context, env Envelope) (Decision, bool, time.Duration) {
			m, _ := dv.msg.(*Message[T])
			if m == nil {
				m = new(Message[T])
			}
			m.Envelope = env
			m.Queue = queue
			m.Exchange = dv.d.Exchange
			m.RoutingKey = dv.d.RoutingKey
			m.ContentType = dv.d.ContentType
			m.Body = dv.d.Body
			m.Redelivered = dv.d.Redelivered
			m.DeliveryCount = deliveryCount(dv.d.Headers)
			if err := decodeDelivery(ctx, codec, cfg.decodeDeadline(), dv.d.ContentType, dv.d.Body, &m.Payload); err != nil {
				if IsRetryable(err) {
					return Retry(err), false, 0
				}
				return Decision{kind: decPark, err: err}, false, -1
			}
			start := time.Now()
			dec := runHandler(ctx, c, h, m)
			return dec, true, time.Since(start)
		})
	}

	// Before subscribing: the queue must exist, then the dead-letter half.
	if err := k.checkQueue(ctx); err != nil {
		k.stopWorkers()
		return nil, err
	}
	if !cfg.skipDecl {
		declPolicy := policy
		if inQueue {
			declPolicy.waits = WaitsInQueue // the queue holds the waits: no ladder
		}
		decls, err := c.rendered(ctx, consumerDeclarations(queue, declPolicy))
		if err == nil {
			decls, err = applyDeclarations(ctx, c.channel, decls, c.tolerateLayout)
		}
		if err != nil {
			k.stopWorkers()
			return nil, fmt.Errorf("acemq: cannot start consumer on %q: declaring its dead-letter queues failed: %w", queue, err)
		}
		c.decls.record(decls)
	}
	c.consumers.add(k)
	if err := k.attach(ctx); err != nil {
		c.consumers.remove(k)
		k.stopWorkers()
		return nil, fmt.Errorf("acemq: cannot start consumer on %q: %w", queue, err)
	}
	return &Consumer{core: k}, nil
}

func runHandler[T any](ctx context.Context, c *Conn, h Handler[T], m *Message[T]) (dec Decision) {
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("acemq: the handler panicked", "queue", m.Queue, "id", idtext.Short(m.Envelope.ID), "panic", r, "stack", string(debug.Stack()))
			dec = Reject(Fatal(fmt.Errorf("acemq: the handler panicked on message %s: %v", idtext.Short(m.Envelope.ID), r)))
		}
	}()
	return h(ctx, m)
}

// deliveryCount is Message.DeliveryCount from a delivery's headers: the
// larger of x-delivery-count and x-acquired-count (RabbitMQ 4.3 writes
// both, and only the second counts nacks).
func deliveryCount(h transport.Table) int {
	return max(countHeader(h["x-delivery-count"]), countHeader(h["x-acquired-count"]))
}

// failedDeliveries is a quorum queue's count of the deliveries that came
// back as failures, the one its delivery limit and delayed retry go by:
// x-delivery-count (on RabbitMQ 4.3 it skips returns by basic.nack, which
// x-acquired-count counts).
func failedDeliveries(h transport.Table) int {
	return countHeader(h["x-delivery-count"])
}

// countHeader reads a broker count header tolerantly: 0 when absent or
// unreadable.
func countHeader(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int:
		return n
	case int16:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}
