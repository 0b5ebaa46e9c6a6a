package acemq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

type prepared struct {
	msg  transport.Message
	sent Sent
	err  error
	typ  string
	span publishSpan // the publish span, when one was started
	ctx  context.Context
}

// buildEnvelope makes the envelope of one publish: given's (its gaps
// filled in), or a new one from o. id, when not empty, is a fresh UUID the
// caller made for a new envelope (SendAll cuts them in chunks).
func (p *publishing) buildEnvelope(o *SendOptions, given *Envelope, routingKey string, headersOK bool, id string) (Envelope, error) {
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
		if id == "" {
			id = newUUID()
		}
		env = newEnvelopeWithID(id)
		if o.Version != 0 {
			env.Version = o.Version
		}
		env.Type = o.Type
		if o.CorrelationID != "" {
			env.CorrelationID = o.CorrelationID
		}
		env.CausationID = o.CausationID
		env.ReplyTo = o.ReplyTo
		if len(o.Headers) > 0 && headersOK {
			env = env.WithHeaders(o.Headers)
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
		env.Origin = p.origin
	}
	return env, env.Validate()
}

// prepare builds one message into pr, which is zero: envelope,
// interceptors, encoding. It never touches the broker. id, when not empty,
// is the fresh id for a new envelope (see buildEnvelope). pr is filled in
// place: a prepared is large, and SendAll's members were copied twice.
func (p *publishing) prepare(pr *prepared, ctx context.Context, exchange, routingKey string, pc *publisherConfig, o *SendOptions, given *Envelope, payload any, id string) {
	key := routingKey
	if o.RoutingKey != "" {
		key = o.RoutingKey
	}
	pr.msg.Exchange, pr.msg.RoutingKey = exchange, key
	pr.ctx = ctx
	fail := func(reason string, err error) {
		pr.err = newPubErr(&pr.msg, OutcomeFailed, reason, false, err)
	}
	if given != nil {
		if fields := o.envelopeFields(); len(fields) > 0 {
			fail(fmt.Sprintf("both an envelope and envelope fields (%v) were given; pass one or the other, because the two answers differ", fields), nil)
			return
		}
	}
	var headerErrs []error
	if len(o.Headers) > 0 {
		headerErrs = o.headerErrs()
	}
	env, err := p.buildEnvelope(o, given, key, len(headerErrs) == 0, id)
	pr.msg.MessageID = env.ID
	pr.typ = env.Type
	if len(headerErrs) > 0 {
		// After the envelope, so the error names the message's id.
		err := errors.Join(headerErrs...)
		fail(err.Error(), err) // the §8.6 sentence, verbatim
		return
	}
	if err != nil {
		fail("the envelope is not valid: "+withoutPrefix(err), err)
		return
	}
	pctx := PublishContext{
		Exchange:   exchange,
		RoutingKey: key,
		Envelope:   env,
		Payload:    payload,
		Persistent: !pc.transient && !o.Transient,
		Mandatory:  pc.mandatory || o.Mandatory,
	}
	pctx, err = p.runPublishInterceptors(ctx, pctx)
	if err != nil {
		fail("an interceptor refused it: "+err.Error(), err)
		return
	}
	env = pctx.Envelope
	if env.ID == "" || env.Validate() != nil {
		fail("an interceptor left an envelope that cannot be sent", env.Validate())
		return
	}
	pr.msg.Exchange, pr.msg.RoutingKey, pr.msg.MessageID = pctx.Exchange, pctx.RoutingKey, env.ID
	pr.typ = env.Type
	// The propagator writes into the envelope where it will be kept, so
	// it needs no heap copy of its own.
	pr.sent.Envelope = env
	pr.ctx = p.tel.publishStart(ctx, pctx.Exchange, pctx.RoutingKey, &pr.sent.Envelope, &pr.span)
	env = pr.sent.Envelope
	codec := p.cfg.codec
	if pc.codec != nil {
		codec = pc.codec
	}
	if o.Codec != nil {
		codec = o.Codec
	}
	body, err := encodeForPublish(codec, pctx.Payload)
	if err != nil {
		fail("the payload could not be encoded: "+withoutPrefix(err), err)
		return
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
		Priority:     o.Priority,
		Headers:      env.render(),
	}
	pr.msg.Body = body
	pr.msg.HeadersOwned = true // render made it for this message alone
	if err := appHeaderRefusal(&pr.msg, env.headers); err != nil {
		pr.err = err
		return
	}
	if err := p.bodyRefusal(&pr.msg); err != nil {
		pr.err = err
		return
	}
	pr.sent = Sent{
		Envelope:    env,
		Exchange:    pctx.Exchange,
		RoutingKey:  pctx.RoutingKey,
		ContentType: codec.ContentType(),
		Mandatory:   pctx.Mandatory,
	}
}

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

// runPublishInterceptors runs the interceptors on a copy of pc and
// returns what they left. Taking pc by value keeps it off the heap when
// there are none.
func (p *publishing) runPublishInterceptors(ctx context.Context, pc PublishContext) (PublishContext, error) {
	if len(p.cfg.publishIcpt) == 0 {
		return pc, nil
	}
	pp := new(PublishContext)
	*pp = pc
	err := p.callPublishInterceptors(ctx, pp)
	return *pp, err
}

func (p *publishing) callPublishInterceptors(ctx context.Context, pctx *PublishContext) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("acemq: a publish interceptor panicked: %v", r)
		}
	}()
	for _, ic := range p.cfg.publishIcpt {
		if err := ic(ctx, pctx); err != nil {
			return err
		}
	}
	return nil
}

// finish reports a member's result (span, counters, hooks) and returns
// what Send returns for it.
func (p *publishing) finish(pr *prepared, start time.Time, err error) (Sent, error) {
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
	p.tel.publishEnd(&pr.span, string(r.Outcome), err)
	p.report(r)
	if err != nil {
		return Sent{}, err
	}
	return pr.sent, nil
}

// withoutPrefix renders err for embedding in a sentence that already starts
// "acemq: ", so the prefix is not doubled.
func withoutPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), "acemq: ")
}

// send publishes one payload: a batch of one on the path SendAll takes.
func (p *publishing) send(ctx context.Context, exchange, routingKey string, pc *publisherConfig, payload any, o *SendOptions) (Sent, error) {
	start := time.Now()
	p.stats.published.Add(1)
	one := getOne()
	defer putOne(one)
	pr := &one.prs[0]
	p.prepare(pr, ctx, exchange, routingKey, pc, o, o.Envelope, payload, "")
	one.errs[0] = pr.err
	if pr.err == nil {
		p.publishAll(ctx, one.prs[:], one.errs[:], false)
	}
	return p.finish(pr, start, one.errs[0])
}

// sendAll publishes n payloads pipelined on the one publish path;
// payload(i) is member i's.
func (p *publishing) sendAll(ctx context.Context, exchange, routingKey string, pc *publisherConfig, n int, payload func(i int) any, o *SendOptions) ([]Sent, error) {
	start := time.Now()
	if o.Envelopes != nil && len(o.Envelopes) != n {
		return nil, fmt.Errorf("acemq: SendAll was given %d payloads and %d envelopes; give one envelope per payload", n, len(o.Envelopes))
	}
	p.stats.published.Add(int64(n))
	w := p.getMembers(n)
	prs, errs := w.prs, w.errs
	var ids idBatch
	for i := range prs {
		given, id := o.Envelope, ""
		if o.Envelopes != nil {
			given = &o.Envelopes[i]
		} else if given == nil {
			id = ids.next()
		}
		p.prepare(&prs[i], ctx, exchange, routingKey, pc, o, given, payload(i), id)
		errs[i] = prs[i].err
	}
	p.publishAll(ctx, prs, errs, false)

	sents := make([]Sent, n)
	failed := 0
	var first error
	allPaused, allUnroutable := true, true
	for i := range prs {
		s, err := p.finish(&prs[i], start, errs[i])
		sents[i] = s
		errs[i] = err
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			if !IsPaused(err) {
				allPaused = false
			}
			if !IsUnroutable(err) {
				allUnroutable = false
			}
		}
	}
	if failed == 0 {
		p.putMembers(w)
		return sents, nil
	}
	// Built only when something failed: a batch's results are as large
	// as its Sents, and zeroing them was a measurable share of SendAll.
	results := make([]Result, n)
	for i := range results {
		results[i] = Result{Sent: sents[i], Err: errs[i]}
	}
	p.putMembers(w)
	return sents, &BatchPublishError{Total: n, Confirmed: n - failed, Failed: failed, First: first,
		AllPaused: allPaused, AllUnroutable: allUnroutable, Results: results}
}

// members is SendAll's working space: one prepared message and one result
// per member. A finished one is kept for the next SendAll (see
// publishing.spareMembers), so a batch does not pay for fresh, zeroed
// memory on every call.
type members struct {
	prs  []prepared
	errs []error
}

// getMembers returns zeroed working space for n members.
func (p *publishing) getMembers(n int) *members {
	w := p.spareMembers.Swap(nil)
	if w == nil || cap(w.prs) < n {
		return &members{prs: make([]prepared, n), errs: make([]error, n)}
	}
	w.prs, w.errs = w.prs[:n], w.errs[:n]
	return w
}

// putMembers clears w (nothing it held may stay reachable) and keeps it
// as the spare, unless it is larger than maxSpareMembers.
func (p *publishing) putMembers(w *members) {
	clear(w.prs)
	clear(w.errs)
	if cap(w.prs) > maxSpareMembers {
		return
	}
	p.spareMembers.Store(w)
}

// maxSpareMembers bounds the working space a publishing keeps between
// SendAll calls (about 1 MiB); a larger batch's is left to the garbage
// collector.
const maxSpareMembers = 2048

// report counts an application publish's outcome and hands it to the
// telemetry and the publish hooks.
func (p *publishing) report(r PublishReport) {
	s := p.stats
	switch r.Outcome {
	case OutcomeConfirmed, OutcomePublished:
		s.confirmed.Add(1)
	case OutcomeRefused:
		s.refused.Add(1)
	case OutcomeUnroutable:
		s.unroutable.Add(1)
		s.failed.Add(1)
	default:
		s.failed.Add(1)
	}
	p.tel.published(r)
	for _, h := range p.cfg.publishHooks {
		h(r)
	}
}
