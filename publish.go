package acemq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
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
	Outcome string
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
	return p.c.send(ctx, p.exchange, p.routingKey, &p.cfg, payload, opts)
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
	return p.c.sendAll(ctx, p.exchange, p.routingKey, &p.cfg, anys, opts)
}

// Publish sends one payload with the Conn's codec to exchange and routing
// key. It behaves as Publisher.Send.
func (c *Conn) Publish(ctx context.Context, exchange, routingKey string, payload any, opts ...SendOption) (Sent, error) {
	return c.send(ctx, exchange, routingKey, &publisherConfig{}, payload, opts)
}

type prepared struct {
	msg  transport.Message
	sent Sent
	err  error
	typ  string
	end  publishEnd
	ctx  context.Context
}

func (c *Conn) buildEnvelope(o *sendOptions, given *Envelope, routingKey string) (Envelope, error) {
	var env Envelope
	if given != nil {
		env = *given
		if env.ID == "" {
			env.ID = NewEnvelope().ID
		}
		if env.Version == 0 {
			env.Version = 1
		}
		if env.Attempt == 0 {
			env.Attempt = 1
		}
		if env.FirstSeen.IsZero() {
			env.FirstSeen = time.Now().Truncate(time.Millisecond)
		}
	} else {
		env = NewEnvelope()
		if o.version != 0 {
			env.Version = o.version
		}
		env.Type = o.typ
		if o.corr != "" {
			env.CorrelationID = o.corr
		}
		env.CausationID = o.cause
		env.ReplyTo = o.replyTo
		if len(o.headers) > 0 {
			env = env.WithHeaders(o.headers)
		}
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.ID
	}
	if env.Type == "" {
		env.Type = routingKey
		if env.Type == "" {
			env.Type = "message"
		}
	}
	if env.Origin == "" {
		env.Origin = c.origin
	}
	return env, env.Validate()
}

// prepare builds one message: envelope, interceptors, encoding. It never
// touches the broker.
func (c *Conn) prepare(ctx context.Context, exchange, routingKey string, pc *publisherConfig, o *sendOptions, given *Envelope, payload any) (pr prepared) {
	key := routingKey
	if o.key != nil {
		key = *o.key
	}
	pr.msg.Exchange, pr.msg.RoutingKey = exchange, key
	pr.end, pr.ctx = noopPublishEnd, ctx
	fail := func(reason string, err error) prepared {
		pr.err = newPubErr(&pr.msg, OutcomeFailed, reason, false, err)
		return pr
	}
	if given != nil && len(o.fieldsSet) > 0 {
		return fail(fmt.Sprintf("both an envelope and envelope fields (%v) were given; pass one or the other, because the two answers differ", o.fieldsSet), nil)
	}
	env, err := c.buildEnvelope(o, given, key)
	pr.msg.MessageID = env.ID
	pr.typ = env.Type
	if len(o.headerErrs) > 0 {
		// After the envelope, so the error names the message's id.
		err := errors.Join(o.headerErrs...)
		return fail(err.Error(), err) // the §8.6 sentence, verbatim
	}
	if err != nil {
		return fail("the envelope is not valid: "+withoutPrefix(err), err)
	}
	pctx := PublishContext{
		Exchange:   exchange,
		RoutingKey: key,
		Envelope:   env,
		Payload:    payload,
		Persistent: !pc.transient,
		Mandatory:  pc.mandatory,
	}
	if o.persistent != nil {
		pctx.Persistent = *o.persistent
	}
	if o.mandatory != nil {
		pctx.Mandatory = *o.mandatory
	}
	pctx, err = c.runPublishInterceptors(ctx, pctx)
	if err != nil {
		return fail("an interceptor refused it: "+err.Error(), err)
	}
	env = pctx.Envelope
	if env.ID == "" || env.Validate() != nil {
		return fail("an interceptor left an envelope that cannot be sent", env.Validate())
	}
	pr.msg.Exchange, pr.msg.RoutingKey, pr.msg.MessageID = pctx.Exchange, pctx.RoutingKey, env.ID
	pr.typ = env.Type
	pr.ctx, pr.end, env = c.tel.publishStart(ctx, pctx.Exchange, pctx.RoutingKey, env)
	codec := c.cfg.codec
	if pc.codec != nil {
		codec = pc.codec
	}
	if o.codec != nil {
		codec = o.codec
	}
	body, err := encodeForPublish(codec, pctx.Payload)
	if err != nil {
		return fail("the payload could not be encoded: "+withoutPrefix(err), err)
	}
	mode := uint8(2)
	if !pctx.Persistent {
		mode = 1
	}
	pr.msg.Mandatory = pctx.Mandatory
	pr.msg.Properties = transport.Properties{
		ContentType:  codec.ContentType(),
		MessageID:    env.ID,
		ReplyTo:      env.ReplyTo,
		DeliveryMode: mode,
		Priority:     o.priority,
		Headers:      env.render(),
	}
	pr.msg.Body = body
	pr.msg.HeadersOwned = true // render made it for this message alone
	if err := headerRefusal(&pr.msg); err != nil {
		pr.err = err
		return pr
	}
	pr.sent = Sent{
		Envelope:    env,
		Exchange:    pctx.Exchange,
		RoutingKey:  pctx.RoutingKey,
		ContentType: codec.ContentType(),
		Mandatory:   pctx.Mandatory,
	}
	return pr
}

// runPublishInterceptors runs the interceptors on a copy of pc and
// returns what they left. Taking pc by value keeps it off the heap when
// there are none.
// encodeForPublish encodes payload with codec. The built-in bytes codec
// copies its input so that an encoded body never aliases the caller's
// slice; on the publish path that copy protects nothing, because every
// transport copies or writes the body before Publish returns and the body
// is not kept afterwards, so a []byte is sent as it is.
func encodeForPublish(codec Codec, payload any) ([]byte, error) {
	if _, ok := codec.(bytesCodec); ok {
		if b, ok := payload.([]byte); ok {
			return b, nil
		}
	}
	return codec.Encode(payload)
}

func (c *Conn) runPublishInterceptors(ctx context.Context, pc PublishContext) (PublishContext, error) {
	if len(c.cfg.publishIcpt) == 0 {
		return pc, nil
	}
	p := new(PublishContext)
	*p = pc
	err := c.callPublishInterceptors(ctx, p)
	return *p, err
}

func (c *Conn) callPublishInterceptors(ctx context.Context, p *PublishContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("acemq: a publish interceptor panicked: %v", r)
		}
	}()
	for _, ic := range c.cfg.publishIcpt {
		if err := ic(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) finish(pr *prepared, start time.Time, err error) (Sent, error) {
	r := PublishReport{
		Exchange:    pr.msg.Exchange,
		RoutingKey:  pr.msg.RoutingKey,
		MessageType: pr.typ,
		Duration:    time.Since(start),
		Envelope:    pr.sent.Envelope,
		Err:         err,
	}
	if err == nil {
		r.Outcome = pr.sent.Outcome
	} else {
		var pe *PublishError
		if errors.As(err, &pe) {
			r.Outcome = pe.Outcome
		} else {
			r.Outcome = OutcomeFailed
		}
	}
	pr.end(r.Outcome, err)
	c.reportPublish(r)
	if err != nil {
		return Sent{}, err
	}
	return pr.sent, nil
}

// applySendOptions returns the options opts set. The options run on a
// heap copy (they are unknown functions), so a send without options
// allocates nothing for them.
func applySendOptions(opts []SendOption) sendOptions {
	if len(opts) == 0 {
		return sendOptions{}
	}
	o := new(sendOptions)
	for _, f := range opts {
		f(o)
	}
	return *o
}

func (c *Conn) send(ctx context.Context, exchange, routingKey string, pc *publisherConfig, payload any, opts []SendOption) (Sent, error) {
	start := time.Now()
	c.stats.published.Add(1)
	o := applySendOptions(opts)
	// pr is pooled: the transport reads pr.msg only during Publish (it
	// copies or writes what it keeps), and nothing returned points into it.
	pr := preparedPool.Get().(*prepared)
	defer func() {
		*pr = prepared{}
		preparedPool.Put(pr)
	}()
	*pr = c.prepare(ctx, exchange, routingKey, pc, &o, o.env, payload)
	if pr.err != nil {
		return c.finish(pr, start, pr.err)
	}
	msg := &pr.msg
	wctx, cancel := c.admissionContext(ctx)
	defer cancel()
	for {
		var changed <-chan struct{} // only WithWaitForRecovery waits on it
		if c.cfg.waitForRecovery {
			changed = c.stateChanged()
		}
		if err := c.admit(wctx, msg); err != nil {
			return c.finish(pr, start, err)
		}
		var err error
		if !c.cfg.confirms && !msg.Mandatory {
			pr.sent.Outcome = OutcomePublished
			err = c.publishUnconfirmed(pr.ctx, msg)
		} else {
			pr.sent.Outcome = OutcomeConfirmed
			err = c.publishConfirmed(pr.ctx, msg)
		}
		if !c.awaitNoticedLoss(wctx, err, changed) {
			return c.finish(pr, start, err)
		}
	}
}

var preparedPool = sync.Pool{New: func() any { return new(prepared) }}

// batchSlot is one batch member's answer, written by the confirm callback.
type batchSlot struct {
	cf      transport.Confirmation
	written bool
	done    bool
}

// batch collects one SendAll's confirmations. Batches are reused (one spare per Conn) with
// their slots and their per-slot callbacks (dones[i] is bound to slot i
// once, not per message). Owner rule: sendAll returns a batch to its Conn
// only when every written member has been answered, because the
// transport calls each callback exactly once and never after that; a
// batch left with answers outstanding (a timeout, a cancelled ctx) is
// left to the garbage collector.
type batch struct {
	mu        sync.Mutex
	slots     []batchSlot
	dones     []transport.ConfirmFunc
	pending   int
	sealed    bool // every message has been written; allDone may close
	finalized bool
	allDone   chan struct{}
	c         *Conn
}

// getBatch returns an empty batch of n slots for c: c's spare one when it
// has one (concurrent SendAlls make their own).
func getBatch(c *Conn, n int) *batch {
	b := c.spareBatch.Swap(nil)
	if b == nil {
		b = &batch{}
	}
	if cap(b.slots) < n {
		b.slots = make([]batchSlot, n)
	}
	b.slots = b.slots[:n]
	for i := len(b.dones); i < n; i++ {
		b.dones = append(b.dones, b.confirmFunc(i))
	}
	b.c, b.allDone = c, make(chan struct{})
	return b
}

// putBatch returns b to its Conn; the caller has checked that nothing is
// pending and has read the slots.
func putBatch(b *batch) {
	c := b.c
	clear(b.slots)
	b.pending, b.sealed, b.finalized, b.c, b.allDone = 0, false, false, nil, nil
	c.spareBatch.Store(b)
}

func (b *batch) confirmFunc(i int) transport.ConfirmFunc {
	return func(cf transport.Confirmation) {
		b.c.permits.release()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.finalized {
			return
		}
		b.slots[i].cf, b.slots[i].done = cf, true
		b.pending--
		if b.pending == 0 && b.sealed {
			close(b.allDone)
		}
	}
}

func (c *Conn) sendAll(ctx context.Context, exchange, routingKey string, pc *publisherConfig, payloads []any, opts []SendOption) ([]Sent, error) {
	start := time.Now()
	o := applySendOptions(opts)
	n := len(payloads)
	if o.envs != nil && len(o.envs) != n {
		return nil, fmt.Errorf("acemq: SendAll was given %d payloads and %d envelopes; give one envelope per payload", n, len(o.envs))
	}
	c.stats.published.Add(int64(n))
	prs := make([]prepared, n)
	errs := make([]error, n)
	for i := range payloads {
		given := o.env
		if o.envs != nil {
			given = &o.envs[i]
		}
		prs[i] = c.prepare(ctx, exchange, routingKey, pc, &o, given, payloads[i])
		errs[i] = prs[i].err
	}
	b := getBatch(c, n)
	// One admission wait for the whole batch: with WithWaitForRecovery the
	// first member waits out a recovery, the others find it over.
	wctx, cancelWait := c.admissionContext(ctx)
	defer cancelWait()
	var stopErr func(msg *transport.Message) error // set when writing must stop
	for i := range prs {
		if errs[i] != nil {
			continue
		}
		msg := &prs[i].msg
		if stopErr != nil {
			errs[i] = stopErr(msg)
			continue
		}
		if err := c.admit(wctx, msg); err != nil {
			errs[i] = err
			continue
		}
		if !c.cfg.confirms && !msg.Mandatory {
			prs[i].sent.Outcome = OutcomePublished
			errs[i] = c.publishUnconfirmed(ctx, msg)
			continue
		}
		prs[i].sent.Outcome = OutcomeConfirmed
		if pe := c.acquire(ctx, msg); pe != nil {
			// No room within the confirm timeout (or ctx ended): the rest
			// of the batch would wait as long again, so it fails the same.
			errs[i] = pe
			reason, cause := pe.Reason, pe.Err
			stopErr = func(m *transport.Message) error { return newPubErr(m, OutcomeFailed, reason, false, cause) }
			continue
		}
		b.mu.Lock()
		b.pending++
		b.slots[i].written = true
		b.mu.Unlock()
		if err := c.writeConfirmed(ctx, msg, b.dones[i]); err != nil && errors.Is(err, transport.ErrNotWritten) {
			c.permits.release()
			b.mu.Lock()
			b.pending--
			b.slots[i].written = false
			b.mu.Unlock()
			if rerr := c.refusal(msg); rerr != nil {
				errs[i] = rerr
			} else {
				errs[i] = newPaused(msg, reasonLostWaiting, "")
			}
		}
	}
	b.mu.Lock()
	b.sealed = true
	if b.pending == 0 {
		close(b.allDone)
	}
	b.mu.Unlock()
	t := time.NewTimer(c.cfg.confirmTimeout)
	var waitErr error
	select {
	case <-b.allDone:
	case <-t.C:
		waitErr = context.DeadlineExceeded
	case <-ctx.Done():
		waitErr = ctx.Err()
	}
	t.Stop()
	b.mu.Lock()
	b.finalized = true
	slots := b.slots
	reusable := b.pending == 0 // no callback can come any more
	b.mu.Unlock()
	if reusable {
		defer putBatch(b) // after the slots are read below
	}

	sents := make([]Sent, n)
	be := &BatchPublishError{Total: n, AllPaused: true, AllUnroutable: true}
	for i := range prs {
		err := errs[i]
		if err == nil && slots[i].written {
			msg := &prs[i].msg
			switch {
			case slots[i].done:
				err = classify(msg, slots[i].cf)
			case waitErr == context.DeadlineExceeded:
				err = newPubErr(msg, OutcomeFailed, fmt.Sprintf("the broker did not confirm it within %s, so it may have arrived; publish it again only if a duplicate is acceptable", c.cfg.confirmTimeout), true, nil)
			default:
				err = newPubErr(msg, OutcomeFailed, fmt.Sprintf("the caller stopped waiting before the broker confirmed it (%v), so it may have arrived", waitErr), true, waitErr)
			}
		}
		s, err := c.finish(&prs[i], start, err)
		sents[i] = s
		errs[i] = err
		if err != nil {
			be.Failed++
			if be.First == nil {
				be.First = err
			}
			if !IsPaused(err) {
				be.AllPaused = false
			}
			if !IsUnroutable(err) {
				be.AllUnroutable = false
			}
		}
	}
	if be.Failed == 0 {
		return sents, nil
	}
	be.Confirmed = n - be.Failed
	// Built only when something failed: a batch's results are as large
	// as its Sents, and zeroing them was a measurable share of SendAll.
	results := make([]Result, n)
	for i := range results {
		results[i] = Result{Sent: sents[i], Err: errs[i]}
	}
	be.Results = results
	return sents, be
}

// withoutPrefix renders err for embedding in a sentence that already starts
// "acemq: ", so the prefix is not doubled.
func withoutPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "acemq: ")
}
