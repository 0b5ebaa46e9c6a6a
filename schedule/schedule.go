// Package schedule delivers messages later without the delayed-message
// plugin or per-message TTLs (behaviour §7.7, contract §3.7).
//
// A scheduled message waits in a ladder of classic queues whose messages
// expire after a fixed time — acemq.schedule.1h, .10m, .1m, .10s and .1s —
// and whose expired messages are dead-lettered to the control queue
// acemq.schedule.due. The scheduler's control consumer reads each one:
// with less than a second left it delivers the message to its target,
// otherwise it sends it to the longest rung that does not overshoot the
// due time. A message is therefore delivered up to about a second early,
// never more, and late by what the broker's expiry takes (see docs/performance.md
// for measured figures).
//
// The payload is encoded once, when it is scheduled; only its bytes move
// after that, and the delivery carries the original content type. Every
// hop and the delivery are mandatory, persistent and confirmed; a crash
// between a hop's confirm and the control message's ack repeats the hop,
// so a message may be delivered more than once. Every delivery of one
// scheduled message carries the same id (derived from the scheduled
// message's own, so an idempotent consumer such as idempotency.Guard
// drops the repeats) and its correlation id.
//
// The wait is measured by the broker, never by comparing clocks: each hop
// carries the wait left once its rung has expired
// (x-schedule-remaining-ms), so a producer or scheduler whose clock is off
// makes no message early. A hop written without it (another library's)
// is timed by x-schedule-due-at against the scheduler's clock.
//
// The names and arguments are the AceMQ family's, so a Go scheduler and a
// Java or Python one can share the same queues.
//
// The manual's page on the scheduler: https://github.com/acemq-go/acemq/blob/main/docs/scheduler.md
package schedule

import (
	"cmp"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// Names and headers from the contract (§3.7).
const (
	// Exchange is the scheduler's direct exchange.
	Exchange = "acemq.schedule"
	// DueQueue is the control queue every rung dead-letters into.
	DueQueue = "acemq.schedule.due"
	// MessageType is the envelope type of hops and deliveries.
	MessageType = "ScheduledMessage"

	HeaderExchange    = "x-schedule-exchange"
	HeaderRoutingKey  = "x-schedule-routing-key"
	HeaderDueAt       = "x-schedule-due-at"
	HeaderContentType = "x-schedule-content-type"
	// HeaderRemaining is the wait left, in ms, once the hop's rung has
	// expired (a 64-bit integer): the Go scheduler writes it on every hop
	// and, when a hop carries it, times the next step by it rather than
	// by x-schedule-due-at and its own clock. Other libraries ignore it.
	HeaderRemaining = "x-schedule-remaining-ms"
)

// hopContentType is what a hop's bytes are labelled on the ladder.
const hopContentType = "application/octet-stream"

// Rung is one waiting queue of the ladder.
type Rung struct {
	Queue string
	TTL   time.Duration
}

var rungs = []Rung{
	{"acemq.schedule.1h", time.Hour},
	{"acemq.schedule.10m", 10 * time.Minute},
	{"acemq.schedule.1m", time.Minute},
	{"acemq.schedule.10s", 10 * time.Second},
	{"acemq.schedule.1s", time.Second},
}

// Rungs returns the ladder, longest first.
func Rungs() []Rung { return append([]Rung(nil), rungs...) }

// rungFor is the longest rung no longer than remaining; false when
// remaining is under a second and the message is due.
func rungFor(remaining time.Duration) (Rung, bool) {
	for _, r := range rungs {
		if r.TTL <= remaining {
			return r, true
		}
	}
	return Rung{}, false
}

// Topology declares the scheduler's exchange, its five rungs (classic,
// with exactly the three contract arguments) and its control queue, each
// bound to the exchange on its own name. Declaring it again, or beside
// another AceMQ library's scheduler, succeeds: the declarations are the
// family's. Start applies it; a producer that only schedules needs it
// applied once somewhere (Start, Conn.Apply or acemq topology apply).
func Topology() *acemq.Topology {
	t := acemq.NewTopology().Exchange(Exchange, acemq.Direct, acemq.ExchangeOptions{})
	for _, r := range rungs {
		t.Queue(r.Queue, acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{
			"x-message-ttl":             r.TTL.Milliseconds(),
			"x-dead-letter-exchange":    Exchange,
			"x-dead-letter-routing-key": DueQueue,
		}}).Bind(r.Queue, Exchange, r.Queue)
	}
	return t.Queue(DueQueue, acemq.QueueOptions{Type: acemq.Classic}).Bind(DueQueue, Exchange, DueQueue)
}

// Option adjusts At and After.
type Option func(*options)

type options struct {
	codec acemq.Codec
	clock Clock
	corr  string
}

// Clock is the time the scheduler reads: At and After to turn a due time
// into a wait, and Start for a hop that carries no wait of its own
// (another library's). Time never elapses on it here: every wait is a
// broker's queue TTL.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// WithClock reads the time from clock instead of the system's (tests).
func WithClock(clock Clock) Option { return func(o *options) { o.clock = clock } }

// WithCodec encodes the payload with codec instead of the Conn's.
func WithCodec(codec acemq.Codec) Option { return func(o *options) { o.codec = codec } }

// WithCorrelationID sets the correlation id the scheduled message carries
// to its target (default: its own id).
func WithCorrelationID(id string) Option { return func(o *options) { o.corr = id } }

func newOptions(c *acemq.Conn, opts []Option) options {
	o := options{codec: c.Config().Codec, clock: systemClock{}}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.clock == nil {
		o.clock = systemClock{}
	}
	return o
}

// After schedules payload for delivery to exchange with routingKey in d.
// See At.
func After(ctx context.Context, c *acemq.Conn, exchange, routingKey string, payload any, d time.Duration, opts ...Option) error {
	o := newOptions(c, opts)
	return at(ctx, c, exchange, routingKey, payload, o.clock.Now().Add(d), o)
}

// At schedules payload for delivery to exchange with routingKey at due.
// The payload is encoded now, once, with the Conn's codec (or WithCodec).
// A due time less than a second away is delivered at once; otherwise the
// message goes onto the ladder, and a running Scheduler (on any Conn,
// in any process) delivers it.
//
// At returns nil once the broker confirmed and routed the first hop (or
// the delivery). An error is the Conn's publish error — an unroutable
// hop means the scheduler's topology is missing (apply Topology) — or an
// encode error; nothing was scheduled unless the error says the message
// may have arrived.
func At(ctx context.Context, c *acemq.Conn, exchange, routingKey string, payload any, due time.Time, opts ...Option) error {
	return at(ctx, c, exchange, routingKey, payload, due, newOptions(c, opts))
}

func at(ctx context.Context, c *acemq.Conn, exchange, routingKey string, payload any, due time.Time, o options) error {
	body, err := o.codec.Encode(payload)
	if err != nil {
		return err
	}
	now := o.clock.Now()
	item := item{exchange: exchange, routingKey: routingKey, dueAt: due.UnixMilli(), contentType: o.codec.ContentType(), body: body,
		remaining: due.Sub(now), carried: true}
	env := acemq.NewEnvelope()
	if o.corr != "" {
		env.CorrelationID = o.corr
	}
	hopped, err := item.forward(ctx, c, env, now)
	if err != nil {
		return err
	}
	m := meters(c)
	m.scheduled.Add(ctx, 1)
	if hopped {
		m.hops.Add(ctx, 1)
	} else {
		m.delivered.Add(ctx, 1)
	}
	return nil
}

// item is a scheduled message between hops.
type item struct {
	exchange, routingKey string
	dueAt                int64 // epoch ms
	// remaining is the wait left, when carried (by At, or by a hop's
	// HeaderRemaining): measured by the broker's TTLs, not by a clock.
	remaining   time.Duration
	carried     bool
	contentType string
	body        []byte
}

// forward delivers it (false) or sends it to its next rung (true); env
// is the scheduled message's identity (id, correlation, causation, first
// seen), kept by every hop.
func (it item) forward(ctx context.Context, c *acemq.Conn, env acemq.Envelope, now time.Time) (bool, error) {
	remaining := it.remaining
	if !it.carried {
		remaining = time.Duration(it.dueAt-now.UnixMilli()) * time.Millisecond
	}
	r, hop := rungFor(remaining)
	if !hop {
		return false, c.PublishRaw(ctx, it.delivery(c, env))
	}
	env.Type = MessageType
	env.Origin = c.Config().Origin
	h := env.WireHeaders()
	h[HeaderExchange] = it.exchange
	h[HeaderRoutingKey] = it.routingKey
	h[HeaderDueAt] = it.dueAt
	h[HeaderContentType] = it.contentType
	h[HeaderRemaining] = (remaining - r.TTL).Milliseconds()
	return true, c.PublishRaw(ctx, acemq.RawMessage{
		Exchange: Exchange, RoutingKey: r.Queue, ContentType: hopContentType,
		MessageID: env.ID, Headers: h, Body: it.body,
	})
}

// delivery is the message the target receives: an envelope of type
// ScheduledMessage with the original content type and no scheduler
// headers, whose id is derived from the scheduled message's (the same on
// every delivery of it, so repeats are recognisable) and which keeps its
// correlation id, its causation the scheduled message.
func (it item) delivery(c *acemq.Conn, scheduled acemq.Envelope) acemq.RawMessage {
	env := acemq.NewEnvelope()
	if scheduled.ID != "" {
		env.ID = DeliveryID(scheduled.ID)
		env.CausationID = scheduled.ID
	}
	env.CorrelationID = cmp.Or(scheduled.CorrelationID, scheduled.ID, env.ID)
	env.Type = MessageType
	env.Origin = c.Config().Origin
	ct := it.contentType
	if ct == "" {
		ct = "application/json"
	}
	return acemq.RawMessage{
		Exchange: it.exchange, RoutingKey: it.routingKey, ContentType: ct,
		MessageID: env.ID, Headers: env.WireHeaders(), Body: it.body,
	}
}

// DeliveryID is the id of the delivery of the scheduled message whose id
// (the control message's, kept by every hop) is scheduled: a UUID
// (version 5 form) of SHA-1 over "acemq.schedule/" and that id, so every
// delivery of one scheduled message, and a repeat after a crash, has the
// same id, and another message's never.
func DeliveryID(scheduled string) string {
	sum := sha1.Sum([]byte("acemq.schedule/" + scheduled))
	sum[6] = sum[6]&0x0f | 0x50 // version 5
	sum[8] = sum[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

// readItem reads a control message; an error names what is missing.
func readItem(env acemq.Envelope, body []byte) (item, error) {
	var missing []string
	str := func(name string) string {
		v, ok := env.Header(name)
		if !ok {
			missing = append(missing, name)
			return ""
		}
		switch x := v.(type) {
		case string:
			return x
		case []byte:
			return string(x)
		}
		missing = append(missing, name+" (not text)")
		return ""
	}
	it := item{exchange: str(HeaderExchange), routingKey: str(HeaderRoutingKey), body: body}
	if v, ok := env.Header(HeaderDueAt); !ok {
		missing = append(missing, HeaderDueAt)
	} else if ms, ok := epochMillis(v); ok {
		it.dueAt = ms
	} else {
		missing = append(missing, fmt.Sprintf("%s (%T %v is not an integer)", HeaderDueAt, v, v))
	}
	if v, ok := env.Header(HeaderContentType); ok {
		if s, ok := v.(string); ok {
			it.contentType = s
		}
	}
	if v, ok := env.Header(HeaderRemaining); ok {
		if ms, ok := epochMillis(v); ok {
			it.remaining, it.carried = time.Duration(ms)*time.Millisecond, true
		}
	}
	if len(missing) > 0 {
		return item{}, fmt.Errorf("acemq: the scheduler's control message lacks %v; it cannot be delivered (schedule messages with schedule.At)", missing)
	}
	return it, nil
}

// epochMillis reads any integer form (contract §1.7), and decimal text
// as some clients write it.
func epochMillis(v any) (int64, bool) {
	if n, ok := wire.Int(v); ok {
		return n, true
	}
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// Scheduler is the control consumer: it moves scheduled messages down the
// ladder and delivers them when due. One or more may run against the
// same broker (they compete for control messages). Safe for concurrent
// use.
type Scheduler struct {
	consumer *acemq.Consumer
}

// Start applies Topology and starts the control consumer on c (WithClock
// applies; the other options do not): the bytes
// codec, prefetch 50, its own dead-letter half (acemq.schedule.due.dlq
// and .parked). A control message without its three routing headers is
// dead-lettered at once with the reason; a delivery or hop that comes
// back unroutable is dead-lettered too (its target is gone: replay it
// once the target exists); other publish failures retry under the
// Conn's retry policy.
func Start(ctx context.Context, c *acemq.Conn, opts ...Option) (*Scheduler, error) {
	o := newOptions(c, opts)
	if err := c.Apply(ctx, Topology()); err != nil {
		return nil, fmt.Errorf("acemq: cannot start the scheduler: %w", err)
	}
	m := meters(c)
	k, err := acemq.Consume(ctx, c, DueQueue, func(ctx context.Context, msg *acemq.Message[[]byte]) acemq.Decision {
		it, err := readItem(msg.Envelope, msg.Body)
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		// The hop keeps the message's identity, not the broker's x-death
		// history nor the scheduler headers it is about to rewrite.
		base := acemq.NewEnvelope()
		base.ID, base.CorrelationID, base.CausationID = msg.Envelope.ID, msg.Envelope.CorrelationID, msg.Envelope.CausationID
		base.FirstSeen = msg.Envelope.FirstSeen
		hopped, err := it.forward(ctx, c, base, o.clock.Now())
		switch {
		case acemq.IsUnroutable(err):
			return acemq.Reject(acemq.Fatal(fmt.Errorf("acemq: the scheduled message to exchange %q, routing key %q came back unroutable: %w", it.exchange, it.routingKey, err)))
		case err != nil:
			return acemq.Retry(err)
		case hopped:
			m.hops.Add(ctx, 1)
		default:
			m.delivered.Add(ctx, 1)
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: acemq.Bytes(), Prefetch: 50, Tag: "acemq-schedule-due"})
	if err != nil {
		return nil, err
	}
	return &Scheduler{consumer: k}, nil
}

// Close drains the control consumer within ctx's deadline (or the Conn's
// drain timeout); control messages not yet handled stay on the broker.
func (s *Scheduler) Close(ctx context.Context) error {
	if s == nil || s.consumer == nil {
		return errors.New("acemq: Close on a scheduler that was never started")
	}
	return s.consumer.Close(ctx)
}
