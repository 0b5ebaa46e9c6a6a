package acemq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/acemq-go/acemq/internal/semconv"
	"github.com/acemq-go/acemq/transport"
)

// InstrumentationScope is the OpenTelemetry scope name of every meter and
// tracer the library uses (contract §5.4).
const InstrumentationScope = "org.acemq.amqp"

// telemetryConfig holds the telemetry options (meter and tracer providers,
// propagator). Nil fields mean the OpenTelemetry globals, read at Connect.
type telemetryConfig struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	propagator     propagation.TextMapPropagator
}

// Attribute keys (contract §5.4) and metric tag keys (contract §5.1).
const (
	attrSystem       = semconv.MessagingSystem
	attrDestination  = semconv.Destination
	attrOperation    = semconv.Operation
	attrMessageID    = semconv.MessageID
	attrConversation = semconv.Conversation
	attrRoutingKey   = semconv.RoutingKey
	attrMessageType  = semconv.MessageType
	attrAttempt      = semconv.Attempt
	attrOutcome      = semconv.Outcome
	attrReason       = semconv.Reason
	attrRetryDelayMs = semconv.RetryDelayMs

	tagExchange = attribute.Key("exchange")
	tagRouting  = attribute.Key("routing.key")
	tagQueue    = attribute.Key("queue")
	tagTrans    = attribute.Key("transport")
	tagType     = attribute.Key("message.type")
	tagOutcome  = attribute.Key("outcome")
	tagTarget   = attribute.Key("target")
	tagRung     = attribute.Key("rung")
)

// attrCacheLimit bounds the cached attribute sets per Conn; past it sets
// are built per call (correct, just slower).
const attrCacheLimit = 4096

type attrKey struct {
	kind       uint8
	a, b, c, d string
}

// attrOpts are the measurement options for one attribute set, built once.
type attrOpts struct {
	key attrKey
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrOpts(kvs ...attribute.KeyValue) *attrOpts {
	s := attribute.NewSet(kvs...)
	o := metric.WithAttributeSet(s)
	return &attrOpts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// telemetry is where the engine reports to metrics and traces. The engine
// calls it at fixed points; this file decides what is recorded.
//
// Call points:
//   - publishStart: once per application publish, after interceptors and
//     before the envelope is rendered (it may add traceparent/tracestate to
//     *env); publishEnd is called exactly once with the outcome word.
//   - published: once per application publish with its report (every
//     outcome, including failures before publishStart); records the metrics.
//   - processStart: once per delivery, before interceptors; the handler runs
//     with the returned context; end is called exactly once with the
//     settlement (not called when the delivery's channel died first).
//   - fallback: a set-aside failure or a missing rung.
//   - inFlight: the consumer in-flight gauge moves by delta.
//
// With no-op providers (checked once, at construction) every call point
// returns at once without allocating.
type telemetry struct {
	transport string
	tp        trace.TracerProvider // as resolved: the option's, else the global one
	mp        metric.MeterProvider
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	tracing   bool
	metering  bool
	// globalDefault is set when tp is OpenTelemetry's global default
	// provider as it is before any SetTracerProvider: it records nothing
	// and only passes a parent's span context on. See unsetGlobal.
	globalDefault bool
	// meterGlobalDefault is the same for mp: until SetMeterProvider its
	// instruments drop every measurement. See metered.
	meterGlobalDefault bool

	publishTotal    metric.Int64Counter
	publishDuration metric.Float64Histogram
	consumeTotal    metric.Int64Counter
	consumeDuration metric.Float64Histogram
	consumeAttempts metric.Int64Histogram
	consumeInFlight metric.Int64UpDownCounter
	retriedTotal    metric.Int64Counter
	deadTotal       metric.Int64Counter
	setAsideFailed  metric.Int64Counter
	rungMissing     metric.Int64Counter
	lostOnDrop      metric.Int64Counter

	mu       sync.RWMutex
	cache    map[attrKey]*attrOpts
	names    map[attrKey]*spanNameOf
	last     [kindCount]atomic.Pointer[attrOpts]   // per call point; see opts
	lastName [kindCount]atomic.Pointer[spanNameOf] // per kind; see spanName

	endProcessMetrics processEnd
}

const (
	kindPublish uint8 = iota
	kindConsume
	kindConsumeType
	kindDead
	kindQueue
	kindSetAside
	kindRung
	kindCount // how many kinds there are
)

func newTelemetry(cfg *config, transportName string) *telemetry {
	t := &telemetry{transport: transportName, cache: make(map[attrKey]*attrOpts), names: make(map[attrKey]*spanNameOf)}
	tc := cfg.telemetry
	tp := tc.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := tc.meterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t.tp, t.mp = tp, mp
	t.prop = tc.propagator
	if t.prop == nil {
		t.prop = propagation.TraceContext{}
	}
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
	default:
		t.tracing = true
		t.tracer = tp.Tracer(InstrumentationScope)
		t.globalDefault = tc.tracerProvider == nil && fmt.Sprintf("%T", tp) == globalDefaultTracerProvider
	}
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
	default:
		t.metering = t.instruments(mp.Meter(InstrumentationScope), cfg)
		t.meterGlobalDefault = tc.meterProvider == nil && fmt.Sprintf("%T", mp) == globalDefaultMeterProvider
	}
	t.endProcessMetrics = t.processMetrics
	return t
}

// instruments creates the contract §5.1 instruments; on failure (an SDK
// that refuses a name) metrics stay off and the Conn logs once.
func (t *telemetry) instruments(m metric.Meter, cfg *config) bool {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	t.publishTotal, err = m.Int64Counter("acemq.publish.total", metric.WithDescription("Application publishes by outcome."), metric.WithUnit("{message}"))
	add(err)
	t.publishDuration, err = m.Float64Histogram("acemq.publish.duration", metric.WithDescription("Send call to outcome, failures too."), metric.WithUnit("s"))
	add(err)
	t.consumeTotal, err = m.Int64Counter("acemq.consume.total", metric.WithDescription("Deliveries settled, by the engine's outcome."), metric.WithUnit("{message}"))
	add(err)
	t.consumeDuration, err = m.Float64Histogram("acemq.consume.duration", metric.WithDescription("Interceptors and handler, one per handled delivery."), metric.WithUnit("s"))
	add(err)
	t.consumeAttempts, err = m.Int64Histogram("acemq.consume.attempts", metric.WithDescription("Attempt number on arrival."), metric.WithUnit("{attempt}"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
	add(err)
	t.consumeInFlight, err = m.Int64UpDownCounter("acemq.consume.in.flight", metric.WithDescription("Deliveries not yet settled."), metric.WithUnit("{message}"))
	add(err)
	t.retriedTotal, err = m.Int64Counter("acemq.messages.retried.total", metric.WithDescription("Retries scheduled."), metric.WithUnit("{message}"))
	add(err)
	t.deadTotal, err = m.Int64Counter("acemq.messages.dead.lettered.total", metric.WithDescription("Messages set aside to .dlq (dead_lettered) or .parked (parked)."), metric.WithUnit("{message}"))
	add(err)
	t.setAsideFailed, err = m.Int64Counter("acemq.messages.set.aside.failed", metric.WithDescription("Set-aside publishes that failed; alert on > 0."), metric.WithUnit("{message}"))
	add(err)
	t.rungMissing, err = m.Int64Counter("acemq.retry.rung.missing", metric.WithDescription("Retries whose broker rung was missing; alert on > 0."), metric.WithUnit("{message}"))
	add(err)
	t.lostOnDrop, err = m.Int64Counter(lostOnDropName, metric.WithDescription(lostOnDropDescription), metric.WithUnit("{message}"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		if cfg.logger != nil {
			cfg.logger.Error("acemq: metrics are off; the meter refused an instrument", "error", err)
		}
		return false
	}
	return true
}

// opts returns the cached measurement options for key, building them with
// build on a miss. The set a call point (key.kind) used last is tried
// first: a publisher or a consumer repeats one key message after message,
// and comparing it costs less than hashing it and taking the cache's lock.
func (t *telemetry) opts(key attrKey, build func() *attrOpts) *attrOpts {
	last := &t.last[key.kind]
	if o := last.Load(); o != nil && o.key == key {
		return o
	}
	t.mu.RLock()
	o := t.cache[key]
	t.mu.RUnlock()
	if o == nil {
		o = build()
		o.key = key
		t.mu.Lock()
		if len(t.cache) < attrCacheLimit {
			t.cache[key] = o
		}
		t.mu.Unlock()
	}
	last.Store(o)
	return o
}

// spanName returns dest+suffix, cached so the hot path does not build it;
// the name a kind used last is tried first, as in opts.
func (t *telemetry) spanName(kind uint8, dest, suffix string) string {
	k := attrKey{kind: kind, a: dest}
	last := &t.lastName[kind]
	if n := last.Load(); n != nil && n.key == k {
		return n.name
	}
	t.mu.RLock()
	n := t.names[k]
	t.mu.RUnlock()
	if n == nil {
		n = &spanNameOf{key: k, name: dest + suffix}
		t.mu.Lock()
		if len(t.names) < attrCacheLimit {
			t.names[k] = n
		}
		t.mu.Unlock()
	}
	last.Store(n)
	return n.name
}

// spanNameOf is one cached span name and its key.
type spanNameOf struct {
	key  attrKey
	name string
}

// published records the publish metrics for one application publish.
func (t *telemetry) published(r PublishReport) {
	if !t.metered() {
		return
	}
	o := t.opts(attrKey{kindPublish, r.Exchange, r.RoutingKey, r.MessageType, string(r.Outcome)}, func() *attrOpts {
		return newAttrOpts(tagExchange.String(r.Exchange), tagRouting.String(r.RoutingKey), tagType.String(r.MessageType),
			tagTrans.String(t.transport), tagOutcome.String(string(r.Outcome)))
	})
	ctx := context.Background()
	t.publishTotal.Add(ctx, 1, o.add...)
	t.publishDuration.Record(ctx, r.Duration.Seconds(), o.rec...)
}

// envCarrier writes propagation fields into an Envelope's headers.
type envCarrier struct{ env *Envelope }

func (c envCarrier) Get(key string) string {
	v, _ := c.env.Header(key)
	s, _ := v.(string)
	return s
}

func (c envCarrier) Set(key, value string) {
	if value == "" {
		return
	}
	if e, err := c.env.WithHeader(key, value); err == nil {
		*c.env = e
	}
}

func (c envCarrier) Keys() []string { return nil }

// globalDefaultTracerProvider is the type name of OpenTelemetry's global
// tracer provider before SetTracerProvider is called (otel/internal/global
// is not importable, so the name is compared, once per Conn).
const globalDefaultTracerProvider = "*global.tracerProvider"

// globalDefaultMeterProvider is the type name of OpenTelemetry's global
// meter provider before SetMeterProvider is called.
const globalDefaultMeterProvider = "*global.meterProvider"

// metered reports whether a measurement made now is recorded anywhere.
// When the Conn meters through the global default provider and no SDK has
// been set since, the global instruments drop every measurement, so the
// call points skip building attribute sets for them; once an application
// calls otel.SetMeterProvider, the global instruments forward to it and
// metered is true from then on.
func (t *telemetry) metered() bool {
	return t.metering && !(t.meterGlobalDefault && otel.GetMeterProvider() == t.mp)
}

// unsetGlobal reports whether the Conn traces through the global default
// provider and no SDK has been set since: its tracer starts a span that
// records nothing and only carries the parent's span context on, so with
// no parent there is nothing to do, and starting one would only allocate.
func (t *telemetry) unsetGlobal() bool {
	return t.globalDefault && otel.GetTracerProvider() == t.tp
}

// publishSpan is one publish's span, kept in the publish's own state
// (prepared) rather than in a closure, so starting one costs no
// allocation of the engine's. The zero value is no span.
type publishSpan struct {
	span      trace.Span // nil when none was started
	recording bool
	dest      string
	key, id   string
	typ, corr string
}

// publishStart starts the publish span of one application publish into
// ps, and returns the context the publish runs in. The propagator writes
// into *env (traceparent, tracestate). publishEnd ends it.
func (t *telemetry) publishStart(ctx context.Context, exchange, routingKey string, env *Envelope, ps *publishSpan) context.Context {
	if !t.tracing {
		return ctx
	}
	if t.unsetGlobal() && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx // the span would be invalid: see below
	}
	dest := exchange
	if dest == "" {
		dest = routingKey
	}
	ctx, span := t.tracer.Start(ctx, t.spanName(kindPublish, dest, " publish"), semconv.Producer)
	if !span.SpanContext().IsValid() {
		return ctx
	}
	t.prop.Inject(ctx, envCarrier{env})
	*ps = publishSpan{span: span, recording: span.IsRecording()}
	if ps.recording {
		ps.dest, ps.key, ps.id, ps.typ, ps.corr = dest, routingKey, env.ID, env.Type, env.CorrelationID
	}
	return ctx
}

// spanAttrs is room for one span's attributes, pooled: the SDK copies
// what SetAttributes is given, and a slice passed through its interface
// would otherwise be a heap allocation per span.
type spanAttrs [9]attribute.KeyValue

var spanAttrsPool = sync.Pool{New: func() any { return new(spanAttrs) }}

// publishEnd ends the span publishStart started, if any, with the outcome.
//
// Every attribute is set in one call as the span ends, not some at the
// start and the outcome later: the SDK grows its attribute slice per call,
// and a second call doubles a full one (an allocation of twice the size
// and a copy). So a recording span costs one attribute slice of its own.
// Span processors' OnStart therefore sees no attributes; exporters see
// them all.
func (t *telemetry) publishEnd(ps *publishSpan, outcome string, err error) {
	span := ps.span
	if span == nil {
		return
	}
	if !ps.recording {
		span.End()
		return
	}
	kv := spanAttrsPool.Get().(*spanAttrs)
	kv[0] = attrSystem.String(semconv.System)
	kv[1] = attrDestination.String(ps.dest)
	kv[2] = attrOperation.String("publish")
	kv[3] = attrMessageID.String(ps.id)
	kv[4] = attrRoutingKey.String(ps.key)
	kv[5] = attrMessageType.String(ps.typ)
	kv[6] = attrOutcome.String(outcome)
	n := 7
	if ps.corr != "" {
		kv[n] = attrConversation.String(ps.corr)
		n++
	}
	if Outcome(outcome) == OutcomeUnroutable {
		var pe *PublishError
		if errors.As(err, &pe) {
			kv[n] = attrReason.String(pe.Reason)
			n++
		}
	}
	span.SetAttributes(kv[:n]...)
	*kv = spanAttrs{}
	spanAttrsPool.Put(kv)
	if semconv.IsError(outcome) {
		desc := outcome
		if err != nil {
			desc = err.Error()
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}

func (t *telemetry) processStart(ctx context.Context, queue string, env Envelope, d *transport.Delivery) (context.Context, processEnd) {
	metered := t.metered()
	if metered {
		o := t.opts(attrKey{kind: kindConsumeType, a: queue, b: env.Type}, func() *attrOpts {
			return newAttrOpts(tagQueue.String(queue), tagType.String(env.Type), tagTrans.String(t.transport))
		})
		attempt := env.Attempt
		if attempt < 1 {
			attempt = 1
		}
		t.consumeAttempts.Record(context.Background(), int64(attempt), o.rec...)
	}
	if !t.tracing {
		if metered {
			return ctx, t.endProcessMetrics
		}
		return ctx, noopProcessEnd
	}
	ctx = t.prop.Extract(ctx, semconv.HeaderCarrier(d.Headers))
	if t.unsetGlobal() && !trace.SpanContextFromContext(ctx).IsValid() {
		// No parent and nothing recording: the span would be invalid.
		if metered {
			return ctx, t.endProcessMetrics
		}
		return ctx, noopProcessEnd
	}
	ctx, span := t.tracer.Start(ctx, t.spanName(kindConsume, queue, " process"), semconv.Consumer)
	if !span.IsRecording() {
		return ctx, func(s Settlement) {
			t.processMetrics(s)
			span.End()
		}
	}
	// As for publish: every attribute in one call as the span ends.
	id, typ, corr, attempt := env.ID, env.Type, env.CorrelationID, env.Attempt
	return ctx, func(s Settlement) {
		t.processMetrics(s)
		kv := spanAttrsPool.Get().(*spanAttrs)
		defer func() {
			*kv = spanAttrs{}
			spanAttrsPool.Put(kv)
		}()
		kv[0] = attrSystem.String(semconv.System)
		kv[1] = attrDestination.String(queue)
		kv[2] = attrOperation.String("process")
		kv[3] = attrMessageID.String(id)
		kv[4] = attrMessageType.String(typ)
		kv[5] = attrAttempt.Int(attempt)
		kv[6] = attrOutcome.String(string(s.Outcome))
		n := 7
		if corr != "" {
			kv[n] = attrConversation.String(corr)
			n++
		}
		switch s.Outcome {
		case ConsumeRetried:
			span.AddEvent("message.retried", trace.WithAttributes(attrRetryDelayMs.Int64(s.RetryDelay.Milliseconds())))
		case ConsumeDeadLettered, ConsumeRejected, ConsumeParked:
			kv[n] = attrReason.String(s.Reason)
			n++
			span.AddEvent("message.dead_lettered", trace.WithAttributes(attrReason.String(s.Reason), attrOutcome.String(string(s.Outcome))))
		}
		span.SetAttributes(kv[:n]...)
		if semconv.IsError(string(s.Outcome)) {
			span.SetStatus(codes.Error, s.Reason)
		}
		span.End()
	}
}

// processMetrics records the consume metrics for one settlement.
func (t *telemetry) processMetrics(s Settlement) {
	if !t.metered() {
		return
	}
	ctx := context.Background()
	typ := s.Envelope.Type
	o := t.opts(attrKey{kind: kindConsume, a: s.Queue, b: typ, c: string(s.Outcome)}, func() *attrOpts {
		return newAttrOpts(tagQueue.String(s.Queue), tagType.String(typ), tagTrans.String(t.transport), tagOutcome.String(string(s.Outcome)))
	})
	t.consumeTotal.Add(ctx, 1, o.add...)
	if s.Handled {
		t.consumeDuration.Record(ctx, s.HandlerDuration.Seconds(), o.rec...)
	}
	switch s.Outcome {
	case ConsumeRetried:
		q := t.opts(attrKey{kind: kindConsumeType, a: s.Queue, b: typ}, func() *attrOpts {
			return newAttrOpts(tagQueue.String(s.Queue), tagType.String(typ), tagTrans.String(t.transport))
		})
		t.retriedTotal.Add(ctx, 1, q.add...)
	case ConsumeDeadLettered, ConsumeRejected, ConsumeParked:
		dest := ConsumeDeadLettered
		if s.Outcome == ConsumeParked {
			dest = ConsumeParked
		}
		d := t.opts(attrKey{kind: kindDead, a: s.Queue, b: typ, c: string(dest)}, func() *attrOpts {
			return newAttrOpts(tagQueue.String(s.Queue), tagType.String(typ), tagTrans.String(t.transport), tagOutcome.String(string(dest)))
		})
		t.deadTotal.Add(ctx, 1, d.add...)
	}
}

func (t *telemetry) fallback(f Fallback) {
	if !t.metered() {
		return
	}
	ctx := context.Background()
	switch f.Kind {
	case "set_aside_failed":
		o := t.opts(attrKey{kind: kindSetAside, a: f.Queue, b: f.Target}, func() *attrOpts {
			return newAttrOpts(tagQueue.String(f.Queue), tagTarget.String(f.Target))
		})
		t.setAsideFailed.Add(ctx, 1, o.add...)
	case "rung_missing":
		o := t.opts(attrKey{kind: kindRung, a: f.Queue, b: f.Target}, func() *attrOpts {
			return newAttrOpts(tagQueue.String(f.Queue), tagRung.String(f.Target))
		})
		t.rungMissing.Add(ctx, 1, o.add...)
	}
}

func (t *telemetry) inFlight(queue string, delta int64) {
	if !t.metered() {
		return
	}
	o := t.opts(attrKey{kind: kindQueue, a: queue}, func() *attrOpts {
		return newAttrOpts(tagQueue.String(queue), tagTrans.String(t.transport))
	})
	t.consumeInFlight.Add(context.Background(), delta, o.add...)
}

type processEnd func(s Settlement)

func noopProcessEnd(Settlement) {}
