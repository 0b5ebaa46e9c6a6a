// Package replay moves set-aside messages from {q}.dlq or {q}.parked back
// to where they can be processed again, after a fix (behaviour §7.4,
// contract §1.8).
//
// Each message is taken with basic.get, offered to the filter, and, when
// accepted, republished with its original bytes as a library hop
// (mandatory, persistent, confirmed) carrying the replay stamps; only then
// is the dead-letter copy acknowledged. A failure therefore leaves a
// message in its dead-letter queue, or at worst in both queues, never in
// neither.
//
// The manual's page on dead letters in code: https://github.com/acemq-go/acemq/blob/main/docs/dead-letters.md
package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// Reason says why a pass stopped.
type Reason string

// The reasons a pass stops (behaviour §7.4).
const (
	// Drained: every message present at the start was examined, or the
	// source ran empty.
	Drained Reason = "drained"
	// LimitReached: Limit messages were moved.
	LimitReached Reason = "limit"
	// DeadlinePassed: the Deadline (or ctx's deadline) passed.
	DeadlinePassed Reason = "deadline"
	// Cancelled: ctx was cancelled.
	Cancelled Reason = "cancelled"
	// Failed: a message could not be moved; it was returned to the source
	// and the pass stopped. Report.Err says why.
	Failed Reason = "failed"
)

// Report is what a pass did.
type Report struct {
	// Source is the queue replayed out of.
	Source string
	// Exchange and RoutingKey are where moved messages were published.
	Exchange   string
	RoutingKey string
	// Moved counts messages republished, confirmed and removed from the source.
	Moved int
	// Skipped counts messages the filter declined; they were returned to
	// the source.
	Skipped int
	// Left is how many of the messages present in the source when the pass
	// started were not moved (skipped ones, and those not reached).
	Left   int
	Reason Reason
	// Err is the failure when Reason is Failed, ctx's error when Cancelled.
	Err error
}

// String is the one-line summary "moved N, skipped M (reason)".
func (r Report) String() string {
	return fmt.Sprintf("moved %d, skipped %d (%s)", r.Moved, r.Skipped, r.Reason)
}

// Option configures a pass.
type Option func(*config)

type config struct {
	exchange  string
	key       *string
	limit     int
	deadline  time.Time
	filter    func(acemq.Envelope, []byte) bool
	keep      bool
	now       func() time.Time
	hopBudget time.Duration
	mgmtURL   string // ManagementAPI
	vhost     string
	unsafe    bool // AllowUnsafeRead
	counted   *int // Counted
}

// ToQueue moves messages to queue through the default exchange instead of
// the queue named by stripping .dlq or .parked from the source.
func ToQueue(queue string) Option {
	return func(c *config) { c.exchange, c.key = "", &queue }
}

// ToExchange publishes moved messages to exchange with routingKey.
func ToExchange(exchange, routingKey string) Option {
	return func(c *config) { c.exchange, c.key = exchange, &routingKey }
}

// Limit stops the pass after n messages were moved (n ≥ 1; default: no
// limit).
func Limit(n int) Option { return func(c *config) { c.limit = n } }

// Deadline stops the pass, between messages, once t has passed. A message
// already being moved is finished first.
func Deadline(t time.Time) Option { return func(c *config) { c.deadline = t } }

// Filter offers every message to keep before it is moved: true moves it,
// false skips it. A skipped message stays unacknowledged until the end of
// the pass and is then returned to the source, so the pass does not see
// it twice. Filter runs on the pass's goroutine; it must not settle the
// message.
//
// A declined message skips rather than stops the pass: dead-letter queues
// mix messages of many causes, and replaying the ones a fix addresses
// should not depend on where they sit in the queue.
func Filter(keep Predicate) Option {
	return func(c *config) { c.filter = keep }
}

// Counted gives Browse and Queue the count the caller has just made of
// the queue they read (with Count, and the same ManagementAPI, so a 0 was
// confirmed): the pass takes n as the messages present at its start
// instead of counting the queue again. One count then serves the caller
// and the pass (the acemq command's progress bar and its replay are the
// same answer, asked of the broker once); messages that arrive after the
// caller's count are left for the next pass, as those arriving after a
// pass's own count are. A negative n is refused with a
// *acemq.ConfigurationError. Count ignores Counted.
func Counted(n int) Option { return func(c *config) { c.counted = &n } }

// presentIn is how many messages the pass takes queue to hold at its
// start: the caller's count (Counted), else Count's.
func presentIn(ctx context.Context, conn *acemq.Conn, queue string, cfg *config) (int, error) {
	if cfg.counted != nil {
		return *cfg.counted, nil
	}
	return count(ctx, conn, queue, cfg)
}

// checkCounted refuses a negative Counted.
func checkCounted(cfg *config) error {
	if cfg.counted != nil && *cfg.counted < 0 {
		return &acemq.ConfigurationError{Option: "replay.Counted", Reason: fmt.Sprintf("count %d is negative", *cfg.counted)}
	}
	return nil
}

// KeepAttempts leaves the attempt number and the x-acemq-error reason as
// they are. By default a replay resets the attempt to 1 and removes the
// error, so the message gets a full retry budget again.
func KeepAttempts() Option { return func(c *config) { c.keep = true } }

// Queue replays messages from source, which is normally {q}.dlq or
// {q}.parked, to {q} through the default exchange (or the target options
// say). It examines at most the messages present when it starts, moving
// each accepted one with its original bytes (headers the Go AMQP client
// could not read included: they go out as the bytes they came in as, see
// Unreadable) and these header changes:
// acemq-replayed-from = source, acemq-replayed-at = now (RFC 3339),
// acemq-replay-count + 1, and, unless KeepAttempts, x-acemq-attempt = 1
// and x-acemq-error removed; id, first-seen and every other header are
// kept. The copy is published mandatory, persistent and confirmed, and the
// source copy is acknowledged only after that.
//
// With a Filter, the messages it declines are handed back to source
// (basic.nack with requeue), so the pass first asks what that does there,
// as Browse does: where it would move them toward a delivery limit or
// hold them back, or where that cannot be learned (give ManagementAPI on
// RabbitMQ), nothing is moved and the error is an *UnsafeReadError,
// unless AllowUnsafeRead. Without a Filter every message examined is
// moved, so nothing is handed back but a message whose move failed.
//
// The pass first counts source as Count does: with ManagementAPI, a 0
// that cannot be confirmed (a quorum queue whose leader is being elected
// answers 0) stops it with Reason Failed and a *CountUnknownError, having
// moved nothing, rather than report an empty queue drained. Without
// ManagementAPI a 0 is believed. With Counted the pass takes the caller's
// count instead and asks none.
//
// Replaying a queue onto itself is refused. When a message cannot be moved
// (unroutable, refused, not confirmed) it is returned to the source and the
// pass stops with Reason Failed; the error is returned too. A cancelled ctx
// stops with Cancelled and returns ctx's error. Other stops return a nil
// error. Every declined message is back in the source when Queue returns
// (or, if the connection was lost, the broker returns it).
func Queue(ctx context.Context, conn *acemq.Conn, source string, opts ...Option) (Report, error) {
	cfg := config{now: time.Now, hopBudget: conn.Config().ConfirmTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	rep := Report{Source: source, Exchange: cfg.exchange}
	switch {
	case cfg.key != nil:
		rep.RoutingKey = *cfg.key
	case strings.HasSuffix(source, ".dlq"):
		rep.RoutingKey = strings.TrimSuffix(source, ".dlq")
	case strings.HasSuffix(source, ".parked"):
		rep.RoutingKey = strings.TrimSuffix(source, ".parked")
	default:
		return rep, &acemq.ConfigurationError{Option: "replay.ToQueue", Reason: fmt.Sprintf("%q ends in neither .dlq nor .parked, so there is no default target; name one with ToQueue or ToExchange", source)}
	}
	if source == "" {
		return rep, &acemq.ConfigurationError{Option: "source", Reason: "the source queue name is empty"}
	}
	if rep.Exchange == "" && rep.RoutingKey == source {
		return rep, &acemq.ConfigurationError{Option: "replay.ToQueue", Reason: fmt.Sprintf("the target is the source %q; replaying a queue onto itself would loop forever", source)}
	}
	if cfg.limit < 0 {
		return rep, &acemq.ConfigurationError{Option: "replay.Limit", Reason: fmt.Sprintf("limit %d is negative", cfg.limit)}
	}
	if err := checkCounted(&cfg); err != nil {
		return rep, err
	}
	var a Access
	if cfg.filter != nil {
		// Declined messages are handed back: on a queue where that counts
		// toward a delivery limit (or holds them back), refuse first.
		var err error
		a, err = inspect(ctx, conn, source, &cfg)
		if err == nil && !a.Safe {
			err = &UnsafeReadError{Access: a}
		}
		if err != nil && !cfg.unsafe {
			rep.Reason, rep.Err = Failed, err
			return rep, err
		}
	}
	p := pass{conn: conn, cfg: &cfg, rep: &rep, byNack: a.ReturnByNack}
	p.run(ctx)
	if rep.Reason == Failed || rep.Reason == Cancelled {
		return rep, rep.Err
	}
	return rep, nil
}

type pass struct {
	conn *acemq.Conn
	cfg  *config
	rep  *Report
	held []*acemq.Pulled // declined (or failed) messages, in the order taken
	// byNack hands held messages back with basic.nack rather than with
	// the puller's close (Access.ReturnByNack).
	byNack bool
}

func (p *pass) stop(reason Reason, err error) {
	p.rep.Reason, p.rep.Err = reason, err
}

// ctxStop maps a finished ctx to its reason.
func (p *pass) ctxStop(ctx context.Context) bool {
	switch err := ctx.Err(); {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded):
		p.stop(DeadlinePassed, nil)
	default:
		p.stop(Cancelled, err)
	}
	return true
}

func (p *pass) run(ctx context.Context) {
	rep, cfg := p.rep, p.cfg
	budget, err := presentIn(ctx, p.conn, rep.Source, cfg)
	if err != nil {
		if !p.ctxStop(ctx) {
			p.stop(Failed, err)
		}
		return
	}
	defer func() { rep.Left = budget - rep.Moved }()
	puller, err := p.conn.NewPuller(ctx)
	if err != nil {
		if !p.ctxStop(ctx) {
			p.stop(Failed, err)
		}
		return
	}
	defer func() {
		// Declined messages go back now, in the order they were taken:
		// nacked one by one where a nack is what keeps them uncounted,
		// else with the puller's close, which keeps their place on a
		// quorum queue without a limit (a nack would put them last).
		returned := true
		if p.byNack {
			for _, m := range p.held {
				if err := m.Nack(true); err != nil {
					returned = false
					break // the channel is gone: the broker returns them
				}
			}
		}
		if err := puller.Close(); err != nil && !p.byNack {
			returned = false
		}
		// RabbitMQ takes them back asynchronously; wait until it counts
		// them, so the next reader (another pass, a purge) sees them.
		if returned && len(p.held) > 0 {
			awaitReturned(ctx, p.conn, rep.Source, budget-rep.Moved)
		}
	}()
	for examined := 0; ; examined++ {
		switch {
		case p.ctxStop(ctx):
			return
		case !cfg.deadline.IsZero() && !cfg.now().Before(cfg.deadline):
			p.stop(DeadlinePassed, nil)
			return
		case cfg.limit > 0 && rep.Moved >= cfg.limit:
			p.stop(LimitReached, nil)
			return
		case examined >= budget:
			p.stop(Drained, nil)
			return
		}
		m, ok, err := puller.Pull(ctx, rep.Source)
		if err != nil {
			if !p.ctxStop(ctx) {
				p.stop(Failed, err)
			}
			return
		}
		if !ok {
			p.stop(Drained, nil)
			return
		}
		if cfg.filter != nil && !cfg.filter(m.Envelope, m.Body) {
			p.held = append(p.held, m)
			rep.Skipped++
			continue
		}
		if !p.move(ctx, m) {
			return
		}
		rep.Moved++
	}
}

// move republishes m to the target and then acks it. On failure m is
// returned to the source and the pass is stopped.
func (p *pass) move(ctx context.Context, m *acemq.Pulled) bool {
	rep, cfg := p.rep, p.cfg
	raw := m.Raw(rep.Exchange, rep.RoutingKey)
	raw.Transient = false
	raw.NotMandatory = false
	if err := restoreUnreadable(raw.Headers); err != nil {
		p.held = append(p.held, m) // handed back at the end of the pass
		p.stop(Failed, fmt.Errorf("acemq: cannot replay message %s from %s as it was published: %w; it was returned to %s", idtext.Short(m.Envelope.ID), rep.Source, err, rep.Source))
		return false
	}
	stamp(raw.Headers, m.Envelope, rep.Source, cfg.now(), cfg.keep)
	hctx, cancel := context.WithTimeout(ctx, cfg.hopBudget)
	err := p.conn.PublishRaw(hctx, raw)
	cancel()
	if err != nil {
		p.held = append(p.held, m) // handed back at the end of the pass
		if !p.ctxStop(ctx) {
			p.stop(Failed, fmt.Errorf("acemq: cannot replay message %s from %s to exchange %q with key %q; it was returned to %s: %w", idtext.Short(m.Envelope.ID), rep.Source, rep.Exchange, rep.RoutingKey, rep.Source, err))
		}
		return false
	}
	if err := m.Ack(); err != nil {
		p.stop(Failed, fmt.Errorf("acemq: message %s was replayed to exchange %q with key %q but could not be removed from %s, so it may now be in both: %w", idtext.Short(m.Envelope.ID), rep.Exchange, rep.RoutingKey, rep.Source, err))
		return false
	}
	return true
}

// restoreUnreadable puts back, into h, the headers the Go AMQP client
// could not read: the RabbitMQ transport delivered them moved, as their
// original AMQP bytes, into acemq-unreadable-headers, with
// x-acemq-unreadable saying why (the reading side's rewrite). A replay
// sends the message as it was published: those bytes go back as the
// headers they were (transport.RawField, written byte for byte by the
// RabbitMQ transport's own publishing connection) and the two headers of
// the rewrite go. It fails when the bytes were too large to keep.
func restoreUnreadable(h map[string]any) error {
	reason, ok := h[wire.UnreadableHeader]
	if !ok {
		return nil
	}
	kept, ok := h[wire.KeptHeader].([]byte)
	if !ok {
		return fmt.Errorf("its headers that the Go AMQP client cannot read (%v) were not kept whole when it was read", reason)
	}
	restored := map[string]any{}
	if err := wire.SplitEntries(kept, func(key string, field []byte) {
		restored[key] = transport.RawField(append([]byte(nil), field...))
	}); err != nil {
		return fmt.Errorf("the kept bytes of its headers that the Go AMQP client cannot read do not read as AMQP fields (%v)", err)
	}
	delete(h, wire.UnreadableHeader)
	delete(h, wire.KeptHeader)
	for k, v := range restored {
		h[k] = v
	}
	return nil
}

// Unreadable reports whether m carries headers the Go AMQP client could
// not read (the RabbitMQ transport delivered them kept as bytes). A replay
// sends them as they were published: a consumer in another language reads
// them; a Go consumer sets the message aside again.
func Unreadable(m *acemq.Pulled) bool {
	_, ok := m.Headers[wire.UnreadableHeader]
	return ok
}

// replayedAtLayout is how acemq-replayed-at is written (contract §1.7):
// RFC 3339 in UTC with exactly three fraction digits and "Z", such as
// "2026-02-03T04:05:06.789Z". acemq.ReplayedAt reads every form the family
// writes.
const replayedAtLayout = "2006-01-02T15:04:05.000Z"

// formatReplayedAt renders t as acemq-replayed-at is written; precision
// below a millisecond is truncated.
func formatReplayedAt(t time.Time) string { return t.UTC().Format(replayedAtLayout) }

// stamp writes the replay headers onto h, a copy of the message's headers.
func stamp(h map[string]any, env acemq.Envelope, source string, now time.Time, keep bool) {
	h[header.ReplayedFrom] = source
	h[header.ReplayedAt] = formatReplayedAt(now)
	h[header.ReplayCount] = int32(acemq.ReplayCount(env) + 1)
	if !keep {
		h[header.Attempt] = int32(1)
		delete(h, header.Error)
	}
}
