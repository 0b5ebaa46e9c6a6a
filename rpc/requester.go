package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTimeout is how long a request waits for its reply unless the
// Requester or the call says otherwise.
const DefaultTimeout = 30 * time.Second

// ReplyQueuePrefix starts every requester's private reply queue name.
const ReplyQueuePrefix = "acemq.reply."

// Option configures a Requester.
type Option func(*config)

type config struct {
	timeout time.Duration
	mp      metric.MeterProvider
	tp      trace.TracerProvider
}

// WithTimeout sets the requester's default per-request timeout (default
// 30s). It must be positive.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMeterProvider records acemq.request.total and acemq.request.duration
// with mp instead of the Conn's (acemq.Conn.MeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider makes each call's "{destination} request" span (CLIENT,
// contract §5.4) with tp instead of the Conn's (acemq.Conn.TracerProvider).
// The request's publish span, made by the Conn's provider, is its child; by
// default both go to the same place.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// Requester sends requests and waits for their replies on one private reply
// queue. It is safe for concurrent use: any number of requests may be
// outstanding at once, and replies may arrive in any order.
type Requester struct {
	conn     *acemq.Conn
	queue    string
	timeout  time.Duration
	metrics  *metrics
	tracer   trace.Tracer
	consumer *acemq.Consumer
	topo     *acemq.Topology

	mu        sync.Mutex
	pending   map[string]chan reply
	closed    bool
	unmatched atomic.Int64
}

// reply is one message taken off the reply queue.
type reply struct {
	body        []byte
	contentType string
	errText     string
	isErr       bool
	closed      bool
}

// NewRequester declares the requester's reply queue acemq.reply.{uuid}
// (classic, exclusive, auto-delete, non-durable) through conn.Apply, so a
// connection recovery declares it again, and starts consuming it. Close
// stops the consumer; the broker then deletes the queue.
func NewRequester(ctx context.Context, conn *acemq.Conn, opts ...Option) (*Requester, error) {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, &acemq.ConfigurationError{Option: "rpc.WithTimeout", Reason: fmt.Sprintf("timeout %s is not positive; a request must be able to wait", cfg.timeout)}
	}
	if cfg.mp == nil {
		cfg.mp = conn.Config().MeterProvider
	}
	if cfg.tp == nil {
		cfg.tp = conn.Config().TracerProvider
	}
	m, err := newMetrics(cfg.mp, conn.Health(context.Background()).Transport)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot create the request metrics: %w", err)
	}
	r := &Requester{
		conn:    conn,
		queue:   ReplyQueuePrefix + acemq.NewEnvelope().ID,
		timeout: cfg.timeout,
		metrics: m,
		tracer:  cfg.tp.Tracer(acemq.InstrumentationScope),
		pending: map[string]chan reply{},
	}
	topo := acemq.NewTopology().Queue(r.queue, acemq.QueueOptions{Type: acemq.Classic, Exclusive: true, AutoDelete: true, Transient: true})
	r.topo = topo
	// On failure the reply queue is forgotten, so no later recovery
	// declares a queue nobody will consume.
	if err := conn.Apply(ctx, topo); err != nil {
		conn.Forget(topo)
		return nil, fmt.Errorf("acemq: cannot declare the reply queue %s: %w", r.queue, err)
	}
	r.consumer, err = acemq.Consume(ctx, conn, r.queue, r.onReply, acemq.ConsumerConfig{NoDeadLetterDeclaration: true, Codec: rawCodec{}})
	if err != nil {
		conn.Forget(topo)
		return nil, fmt.Errorf("acemq: cannot consume the reply queue %s: %w", r.queue, err)
	}
	return r, nil
}

// ReplyQueue is the name of the requester's reply queue, the address its
// requests carry.
func (r *Requester) ReplyQueue() string { return r.queue }

// Unmatched counts replies that arrived for no waiting request (late
// replies to timed-out requests, or replies to another requester's
// correlation). They were acknowledged and dropped.
func (r *Requester) Unmatched() int64 { return r.unmatched.Load() }

// Close stops the reply consumer and fails every request still waiting
// with acemq.ErrClosed. It is idempotent.
func (r *Requester) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	waiting := r.pending
	r.pending = map[string]chan reply{}
	r.mu.Unlock()
	for _, ch := range waiting {
		ch <- reply{closed: true}
	}
	err := r.consumer.Close(ctx)
	// The reply queue goes with its connection (exclusive); a recovery
	// must not declare it again.
	r.conn.Forget(r.topo)
	return err
}

func (r *Requester) onReply(_ context.Context, m *acemq.Message[reply]) acemq.Decision {
	rep := m.Payload
	rep.contentType = m.ContentType
	if v, ok := m.Envelope.Header(header.ReplyError); ok {
		rep.isErr = true
		rep.errText = headerText(v)
	}
	corr := m.Envelope.CorrelationID
	r.mu.Lock()
	ch, ok := r.pending[corr]
	if ok {
		delete(r.pending, corr)
	}
	r.mu.Unlock()
	if !ok {
		r.unmatched.Add(1)
		r.conn.Config().Logger.Debug("acemq: dropped a reply that no request is waiting for", "queue", r.queue, "correlation", corr, "id", idtext.Short(m.Envelope.ID))
		return acemq.Accept()
	}
	ch <- rep // buffered: never blocks
	return acemq.Accept()
}

// abandon stops waiting for corr's reply. It reports false when corr was
// still pending: no reply came, and none can be matched to it any more (a
// later one is unmatched). It reports true with what onReply or Close sent
// when either took corr first: a reply taken off the queue (or the closed
// marker) is never thrown away. Both send right after removing corr from
// pending, into ch's free slot, so the receive never waits for the broker.
func (r *Requester) abandon(corr string, ch chan reply) (reply, bool) {
	r.mu.Lock()
	_, waiting := r.pending[corr]
	delete(r.pending, corr)
	r.mu.Unlock()
	if waiting {
		return reply{}, false
	}
	return <-ch, true
}

func headerText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// RequestOption adjusts one Request.
type RequestOption func(*requestConfig)

type requestConfig struct {
	timeout time.Duration
	env     *acemq.Envelope
	send    acemq.SendOptions
}

// Timeout sets this request's timeout instead of the requester's.
func Timeout(d time.Duration) RequestOption { return func(c *requestConfig) { c.timeout = d } }

// WithEnvelope sends the request with this envelope. Its correlation id and
// reply address are overwritten: every request gets a fresh correlation.
func WithEnvelope(e acemq.Envelope) RequestOption {
	return func(c *requestConfig) { c.env = &e }
}

// WithSendOptions passes publish options (type, headers, priority, codec…)
// to the request's publish. A correlation id or reply address given here is
// overridden. Use WithEnvelope, not acemq.SendOptions.Envelope, to give a whole
// envelope.
func WithSendOptions(o acemq.SendOptions) RequestOption {
	return func(c *requestConfig) { c.send = o }
}

// Request publishes req to exchange with routingKey and waits for the
// reply, decoded into Resp with the Conn's codec by content type.
//
// The wait ends at the sooner of the timeout (30s unless set) and ctx's
// deadline; then the error is a *TimeoutError matching ErrRequestTimedOut,
// also when it ended before the broker confirmed the request (which may
// still have arrived). A cancelled ctx returns ctx's error. A reply taken
// off the reply queue before Request stopped waiting is returned even if
// ctx ended at that moment or the publish reported a failure (a late
// confirm): it proves the request arrived. An error reply returns a
// *ResponderError. A request that could not be published returns an error
// wrapping the *acemq.PublishError. When the Conn is closed for good while
// the request waits (acemq.Conn.Done), the error matches acemq.ErrClosed at
// once instead of a timeout later. Every call is counted in
// acemq.request.total and acemq.request.duration with outcome answered,
// timed_out or failed, and traced as one "{destination} request" span
// (CLIENT; destination is the exchange, or the routing key on the default
// exchange) carrying the same outcome, ERROR for timed_out and failed. The
// span is a child of ctx's span and the parent of the request's publish
// span, so a responder that traces (AceMQ's does) continues the request's
// trace in its process span and in the reply it sends, which the requester
// processes in that trace.
// Request is safe for concurrent use.
func Request[Req, Resp any](ctx context.Context, r *Requester, exchange, routingKey string, req Req, opts ...RequestOption) (Resp, error) {
	var zero Resp
	start := time.Now()
	rc := requestConfig{timeout: r.timeout}
	for _, o := range opts {
		o(&rc)
	}
	msgType := routingKey
	if msgType == "" {
		msgType = "message"
	}
	var id string
	if rc.env != nil {
		id = rc.env.ID
		if rc.env.Type != "" {
			msgType = rc.env.Type
		}
	}
	ctx, span := startRequestSpan(ctx, r.tracer, exchange, routingKey)
	// finish counts and ends the call exactly once, with the error Request
	// returns.
	finish := func(outcome string, err error) (Resp, error) {
		r.metrics.record(ctx, routingKey, msgType, outcome, time.Since(start))
		span.end(outcome, id, msgType, err)
		return zero, err
	}
	if rc.timeout <= 0 {
		return finish(OutcomeFailed, &acemq.ConfigurationError{Option: "rpc.Timeout", Reason: fmt.Sprintf("timeout %s is not positive; a request must be able to wait", rc.timeout)})
	}

	corr := acemq.NewEnvelope().ID
	span.conversation(corr)
	ch := make(chan reply, 1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return finish(OutcomeFailed, acemq.ErrClosed)
	}
	r.pending[corr] = ch
	r.mu.Unlock()

	wait := rc.timeout
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
		wait = time.Until(d).Round(time.Millisecond)
	}

	send := rc.send
	if rc.env != nil {
		e := *rc.env
		e.CorrelationID = corr
		e.ReplyTo = r.queue
		send.Envelope = &e
	} else {
		send.CorrelationID, send.ReplyTo = corr, r.queue
	}
	sent, err := r.conn.Publish(wctx, exchange, routingKey, req, send)
	if err != nil {
		mayHaveArrived := false
		if sent.Envelope.ID != "" {
			id = sent.Envelope.ID
		}
		if sent.Envelope.Type != "" {
			msgType = sent.Envelope.Type
		}
		var pe *acemq.PublishError
		if errors.As(err, &pe) {
			if pe.MessageID != "" {
				id = pe.MessageID
			}
			mayHaveArrived = pe.Sent
		}
		if rep, ok := r.abandon(corr, ch); ok {
			// The request arrived and was answered while its publish was
			// still waiting for the broker's confirm.
			return settle(r, rep, id, corr, finish)
		}
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return finish(OutcomeFailed, ctx.Err())
		}
		if mayHaveArrived && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			// The wait ended while the confirm was awaited: the request
			// may be queued, handled or done, as for any timeout.
			return finish(OutcomeTimedOut, &TimeoutError{ID: id, CorrelationID: corr, Timeout: wait, ctxDeadline: ctx.Err() != nil})
		}
		return finish(OutcomeFailed, fmt.Errorf("acemq: cannot send the request to exchange %q with key %q: %w", exchange, routingKey, err))
	}
	msgType = sent.Envelope.Type
	id = sent.Envelope.ID

	select {
	case rep := <-ch:
		return settle(r, rep, sent.Envelope.ID, corr, finish)
	case <-wctx.Done():
		if rep, ok := r.abandon(corr, ch); ok {
			// The reply was matched before the caller stopped waiting.
			return settle(r, rep, sent.Envelope.ID, corr, finish)
		}
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return finish(OutcomeFailed, err)
		}
		return finish(OutcomeTimedOut, &TimeoutError{ID: sent.Envelope.ID, CorrelationID: corr, Timeout: wait, ctxDeadline: ctx.Err() != nil})
	case <-r.conn.Done():
		// The reply consumer has been drained and nothing more can arrive:
		// say so now rather than at the timeout.
		if rep, ok := r.abandon(corr, ch); ok {
			return settle(r, rep, sent.Envelope.ID, corr, finish)
		}
		return finish(OutcomeFailed, fmt.Errorf("acemq: the connection was closed while request %s waited for its reply, so no reply can arrive; the request may still be queued, being handled, or done: %w", idtext.Short(sent.Envelope.ID), acemq.ErrClosed))
	}
}

// settle turns what the reply consumer (or Close) handed request id into
// Request's result, and counts and ends the call through finish.
func settle[Resp any](r *Requester, rep reply, id, corr string, finish func(outcome string, err error) (Resp, error)) (Resp, error) {
	if rep.closed {
		return finish(OutcomeFailed, fmt.Errorf("acemq: the requester was closed while request %s waited for its reply: %w", id, acemq.ErrClosed))
	}
	if rep.isErr {
		return finish(OutcomeFailed, &ResponderError{ID: id, CorrelationID: corr, Text: rep.errText})
	}
	var resp Resp
	if err := r.conn.Config().Codec.Decode(rep.contentType, rep.body, &resp); err != nil {
		return finish(OutcomeFailed, fmt.Errorf("acemq: the reply to request %s could not be decoded into %T: %w", id, resp, err))
	}
	_, _ = finish(OutcomeAnswered, nil)
	return resp, nil
}
