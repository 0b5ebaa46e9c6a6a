package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// publishing is a Conn's publishing pipeline: the publishing channels and
// their repair, the outstanding-publish permits, the broker's blocked
// state, admission (refuse, or wait out a recovery), the one write and
// confirm path that Send, SendAll and library hops share (batch.go), and
// the classification of the broker's answers. It reads the Conn's state
// only through its lifecycle's methods. It starts no goroutine.
type publishing struct {
	cfg    *config // read only
	origin string
	logger *slog.Logger
	tel    *telemetry
	stats  *counters
	life   *lifecycle
	events *events

	permits  *permits
	pubs     atomic.Pointer[pubSet]
	rr       atomic.Uint64 // round robin over the confirm channels
	repairMu sync.Mutex    // serialises publishing-channel repairs
	// spare is one finished batch kept for the next (see batch): a slot
	// the pipeline owns, so a garbage collection does not empty it as it
	// would a sync.Pool.
	spare atomic.Pointer[batch]
	// batches keeps batches for concurrent publishes beside spare. It is
	// the Conn's own, not the package's: a batch holds a timer and a
	// channel, and those belong to the synctest bubble (or its absence)
	// they were made in, so a batch must never pass from one Conn's tests
	// to another's (a package-wide pool did: the second bubble's SendAll
	// died receiving on the first bubble's channel).
	batches sync.Pool
	// spareMembers is one finished SendAll's working space, kept for the
	// next (see members).
	spareMembers atomic.Pointer[members]
	blocked      atomic.Pointer[blockState]
	blockTok     atomic.Pointer[byte] // identifies the publishing connection whose blocked notices count
}

type blockState struct {
	active bool
	reason string
}

// pubSet is one publishing connection's channels.
type pubSet struct {
	gen     uint64
	conn    transport.Connection // the publishing connection, for repairs
	confirm []transport.Publisher
	plain   transport.Publisher // non-confirming, only with confirms off
}

// Contract sentences (contract §8.2–8.4).
const (
	reasonLostWaiting = "the connection has been lost and is waiting to be recovered; this message was not sent, and a retry once the recovery completes will go down the recovered connection."
	reasonReopening   = "the connection is being recovered and its channels are not open yet. Publishing now would be refused by the broker and would close the connection again; this message was not sent, and a retry once the recovery completes will go down the recovered connection."
	reasonNack        = "the broker refused to confirm it. The message reached the broker and the broker has not taken responsibility for it, so it must be treated as not sent"
	reasonLost        = "the connection was lost and remade before the broker confirmed it, so whether it arrived is unknown; publish it again only if a duplicate is acceptable"
	reasonNoQueue     = "no queue is bound to receive it"
	reasonClosed      = "the connection has been closed; nothing was sent"
	// Not a contract sentence: the broker closed the publishing channel
	// (code, text) while the connection stayed up.
	reasonChannelClosed = "the broker closed the publishing channel before confirming it (%d %s), so whether it arrived is unknown; publish it again only if a duplicate is acceptable"
	reasonNotConfirmed  = "the broker did not confirm it within %s, so it may have arrived; publish it again only if a duplicate is acceptable"
	reasonStoppedWait   = "the caller stopped waiting before the broker confirmed it (%v), so it may have arrived"
	// Not contract sentences: a write bounded by the caller's context.
	reasonStoppedBeforeWrite = "the caller stopped waiting before it could be written (%v): another write held the connection, whose broker was not reading it; nothing was sent"
	reasonWriteAbandoned     = "its write was abandoned when the caller's context ended (%v) with the broker not reading the connection, which was closed, so it may have arrived; publish it again only if a duplicate is acceptable"
	reasonWriteFailed        = "its write failed part way and the connection was closed, so it may have arrived; publish it again only if a duplicate is acceptable"
)

// writeFailedReason says why a write that failed part way leaves the
// message's arrival unknown: the caller's context ended during a write the
// broker was not reading, or the write failed.
func writeFailedReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf(reasonWriteAbandoned, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf(reasonWriteAbandoned, context.Canceled)
	}
	return reasonWriteFailed
}

func blockedReason(reason string) string {
	s := "the broker has blocked this connection; publishing is paused"
	if reason != "" {
		s += ": " + reason
	}
	return s + ". Nothing was sent; back off and retry once the broker unblocks"
}

func newPubErr(msg *transport.Message, outcome Outcome, reason string, sent bool, cause error) *PublishError {
	return &PublishError{
		MessageID:  msg.MessageID,
		Exchange:   msg.Exchange,
		RoutingKey: msg.RoutingKey,
		Reason:     reason,
		Sent:       sent,
		Outcome:    outcome,
		Err:        cause,
	}
}

// isLimit reports a transport's size refusal: another channel would
// refuse it too.
func isLimit(err error) bool {
	var le *transport.LimitError
	return errors.As(err, &le)
}

// unencodable is the refusal of a publish the transport could not encode
// (a header value AMQP 0-9-1 has no field type for) or would not write
// (over frame_max or the maximum message size: limitRefusal), or nil when
// err says something else. It is bad input, not a lost connection: nothing was
// written, and sending the same message again cannot help.
func unencodable(msg *transport.Message, err error) error {
	if lerr := limitRefusal(msg, err); lerr != nil {
		return lerr
	}
	if !errors.Is(err, transport.ErrUnencodable) {
		return nil
	}
	if errors.Is(err, transport.ErrShortString) {
		return newPubErr(msg, OutcomeRefused, fmt.Sprintf("a value AMQP 0-9-1 writes as a short string is too long (%v); nothing was sent. Shorten it: the exchange, the routing key, the content type, the message id, the correlation id and reply-to each hold at most 255 bytes", err), false, err)
	}
	return newPubErr(msg, OutcomeRefused, fmt.Sprintf("a header cannot be written (%v); nothing was sent. Change the header's value to a string, number, bool, []byte, time.Time, table or list", err), false, err)
}

func newPaused(msg *transport.Message, reason, brokerReason string) error {
	return &PublishingPausedError{
		PublishError: *newPubErr(msg, OutcomeRefused, reason, false, nil),
		BrokerReason: brokerReason,
	}
}

// openPublishers opens the publishing channels on pc.
func (p *publishing) openPublishers(ctx context.Context, pc transport.Connection) (*pubSet, error) {
	set := &pubSet{conn: pc}
	for i := 0; i < p.cfg.publishChannels; i++ {
		pub, err := pc.Publisher(ctx, true)
		if err != nil {
			return nil, fmt.Errorf("acemq: cannot open a publishing channel: %w", err)
		}
		set.confirm = append(set.confirm, pub)
	}
	if !p.cfg.confirms {
		pub, err := pc.Publisher(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("acemq: cannot open a publishing channel: %w", err)
		}
		set.plain = pub
	}
	return set, nil
}

// install makes set, of connection generation gen, the channels publishes use.
func (p *publishing) install(set *pubSet, gen uint64) {
	set.gen = gen
	p.pubs.Store(set)
}

// blockedNotices returns the OnBlocked callback for a new publishing
// connection. Only the newest connection's notices count: one still
// queued on a lost connection must not leave a stale "blocked" on its
// successor.
func (p *publishing) blockedNotices() func(active bool, reason string) {
	tok := new(byte)
	p.blockTok.Store(tok)
	return func(active bool, reason string) {
		if p.blockTok.Load() == tok {
			p.onBlocked(active, reason)
		}
	}
}

// forgetBlocked ignores the lost connection's blocked notices and clears
// the blocked state.
func (p *publishing) forgetBlocked() {
	p.blockTok.Store(nil)
	p.blocked.Store(nil)
}

func (p *publishing) onBlocked(active bool, reason string) {
	if active {
		p.blocked.Store(&blockState{active: true, reason: reason})
		p.logger.Warn("acemq: the broker has blocked this connection; publishing is paused", "reason", reason)
		p.events.emit(Event{Kind: EventBlocked, Reason: reason})
	} else {
		p.blocked.Store(nil)
		p.logger.Info("acemq: the broker has unblocked this connection; publishing resumes")
		p.events.emit(Event{Kind: EventUnblocked})
	}
	p.life.broadcast()
}

// isBlocked reports whether the broker blocks publishing, and why.
func (p *publishing) isBlocked() (bool, string) {
	if b := p.blocked.Load(); b != nil && b.active {
		return true, b.reason
	}
	return false, ""
}

// waitIdle waits until no confirmed publish is outstanding, or until
// deadline or ctx.
func (p *publishing) waitIdle(ctx context.Context, deadline time.Time) {
	p.permits.waitIdle(ctx, deadline)
}

// refusal returns the error for a publish that must be declined before a
// permit or a byte, or nil when publishing is possible now.
func (p *publishing) refusal(msg *transport.Message) error {
	switch p.life.current() {
	case StateClosed:
		if gerr := p.life.gaveUpErr(); gerr != nil {
			return newPubErr(msg, OutcomeRefused, reasonClosed, false, errors.Join(ErrClosed, gerr))
		}
		return newPubErr(msg, OutcomeRefused, reasonClosed, false, ErrClosed)
	case StateLost:
		return newPaused(msg, reasonLostWaiting, "")
	case StateReopening:
		return newPaused(msg, reasonReopening, "")
	}
	if blocked, reason := p.isBlocked(); blocked {
		return newPaused(msg, blockedReason(reason), reason)
	}
	return nil
}

// admit decides whether an application publish may go ahead now: nil, or
// the refusal. With Config.WaitForRecovery a recovery (not a block) is waited
// out within ctx first.
func (p *publishing) admit(ctx context.Context, msg *transport.Message) error {
	if !p.cfg.waitForRecovery {
		return p.refusal(msg)
	}
	return p.awaitPublishable(ctx, msg, false)
}

// awaitNoticedLoss reports whether an application publish refused with err
// should be admitted again: with Config.WaitForRecovery, one whose write found
// the connection gone before the Conn noticed (paused, nothing written, no
// broker block) waits until the Conn's state has changed since changed
// was taken, so that admission then waits out the recovery as it does for
// a publish made after the loss. It reports false when ctx ends first.
func (p *publishing) awaitNoticedLoss(ctx context.Context, err error, changed <-chan struct{}) bool {
	if blocked, _ := p.isBlocked(); !p.cfg.waitForRecovery || !IsPaused(err) || blocked {
		return false
	}
	select {
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	}
}

// admissionContext bounds admit's wait: ctx, or the confirm timeout when
// ctx has no deadline. Without Config.WaitForRecovery nothing waits, so ctx
// is returned as is.
func (p *publishing) admissionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !p.cfg.waitForRecovery {
		return ctx, func() {}
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.cfg.confirmTimeout)
}

// awaitPublishable waits until a publish would not be refused, or until ctx
// ends. blockedToo makes it wait out a broker block as well as a recovery
// (hops); otherwise a block is refused at once (application publishes).
func (p *publishing) awaitPublishable(ctx context.Context, msg *transport.Message, blockedToo bool) error {
	for {
		changed := p.life.changes()
		err := p.refusal(msg)
		if err == nil {
			return nil
		}
		st := p.life.current()
		if st == StateClosed {
			return err
		}
		if !blockedToo && st == StateOpen {
			// Open yet refused: a broker block, which an application publish
			// does not wait out — unless the recovery finished between the
			// two reads, so look once more rather than return a stale
			// "recovering" refusal.
			return p.refusal(msg)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return err
		}
	}
}

// acquire takes one outstanding-publish permit, waiting at most the confirm
// timeout and ctx. Its failure is always a *PublishError (nothing was sent).
func (p *publishing) acquire(ctx context.Context, msg *transport.Message) *PublishError {
	if p.permits.tryAcquire() {
		return nil
	}
	t := time.NewTimer(p.cfg.confirmTimeout)
	defer t.Stop()
	switch err := p.permits.acquire(ctx, t.C); err {
	case nil:
		return nil
	case errCeiling:
		return newPubErr(msg, OutcomeFailed, p.ceilingReason(), false, nil)
	default:
		return newPubErr(msg, OutcomeFailed, fmt.Sprintf("the caller stopped waiting for room to publish (%v); nothing was sent", err), false, err)
	}
}

// acquireHeld is acquire for a writer under hd: the hold is released
// before the slow path, which may wait.
func (p *publishing) acquireHeld(ctx context.Context, msg *transport.Message, hd *holding) *PublishError {
	if p.permits.tryAcquire() {
		return nil
	}
	hd.release()
	return p.acquire(ctx, msg)
}

func (p *publishing) ceilingReason() string {
	return fmt.Sprintf("%d publishes are already waiting for a confirm and none completed within %s. The broker is not keeping up; publish more slowly rather than buffering more.",
		p.cfg.maxOutstanding, p.cfg.confirmTimeout)
}

func (p *publishing) pickPublisher() (*pubSet, transport.Publisher) {
	set := p.pubs.Load()
	n := uint64(len(set.confirm))
	i := p.rr.Add(1)
	return set, set.confirm[i%n]
}

// classify turns the broker's answer into nil or a *PublishError.
func classify(msg *transport.Message, cf transport.Confirmation) error {
	switch cf.Outcome {
	case transport.Acked:
		return nil
	case transport.Returned:
		reason := cf.ReplyText
		if reason == "" {
			reason = reasonNoQueue
		}
		e := newPubErr(msg, OutcomeUnroutable, reason, true, nil)
		e.Unroutable = true
		e.ReplyCode = int(cf.ReplyCode)
		return e
	case transport.Nacked:
		e := newPubErr(msg, OutcomeFailed, reasonNack, true, nil)
		e.Nacked = true
		return e
	default:
		var te *transport.Error
		if errors.As(cf.Err, &te) && te.Server && !te.Connection {
			if e := brokerSizeRefusal(msg, te); e != nil {
				return e
			}
			// The broker closed the publishing channel, not the connection:
			// nothing was "remade", so say what happened.
			e := newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonChannelClosed, te.Code, te.Reason), true, cf.Err)
			e.ReplyCode = te.Code
			return e
		}
		return newPubErr(msg, OutcomeFailed, reasonLost, true, cf.Err)
	}
}

// writeHeld writes msg on a confirm channel with done as its callback
// and returns the publisher it went on and the transport's answer. A
// channel the broker closed while the connection stayed up (a publish to a
// missing exchange closes it with 404) is replaced and the write tried
// again, so one bad publish never leaves a dead channel in the round robin
// refusing every Nth publish. The publishing connection is held under hd
// (nil: no hold) for the write and let go before a repair, which waits
// for the broker.
func (p *publishing) writeHeld(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc, hd *holding) (transport.Publisher, error) {
	for try := 0; ; try++ {
		set, pub := p.pickPublisher()
		if hd != nil {
			hd.on(set)
		}
		err := pub.Publish(ctx, msg, done)
		if err == nil || !errors.Is(err, transport.ErrNotWritten) || errors.Is(err, transport.ErrUnencodable) || isLimit(err) {
			return pub, err
		}
		if hd != nil {
			hd.release()
		}
		if try >= 3 || ctx.Err() != nil || p.refusal(msg) != nil || !p.repairPublisher(ctx, set, pub) {
			return pub, err
		}
	}
}

// repairPublisher replaces old, a publisher of set whose channel ended,
// with a fresh one on the same publishing connection. It reports whether
// set's generation still has a live publisher in old's place; false when
// the connection itself is gone (recovery takes over) or reopening failed.
func (p *publishing) repairPublisher(ctx context.Context, set *pubSet, old transport.Publisher) bool {
	select {
	case <-old.Done():
	default:
		return false // it refused for another reason; do not churn
	}
	p.repairMu.Lock()
	defer p.repairMu.Unlock()
	cur := p.pubs.Load()
	if cur.gen != set.gen {
		return false
	}
	idx := -1
	for i, pub := range cur.confirm {
		if pub == old {
			idx = i
		}
	}
	if idx < 0 && cur.plain != old {
		return true // already replaced by a concurrent repair
	}
	if p.life.current() != StateOpen {
		return false
	}
	select {
	case <-cur.conn.Done():
		return false
	default:
	}
	np, err := cur.conn.Publisher(ctx, idx >= 0)
	if err != nil {
		p.logger.Warn("acemq: cannot reopen a publishing channel the broker closed", "error", err)
		return false
	}
	next := &pubSet{gen: cur.gen, conn: cur.conn, confirm: append([]transport.Publisher(nil), cur.confirm...), plain: cur.plain}
	if idx >= 0 {
		next.confirm[idx] = np
	} else {
		next.plain = np
	}
	if !p.pubs.CompareAndSwap(cur, next) {
		_ = np.Close()
		return false
	}
	p.logger.Info("acemq: reopened a publishing channel the broker closed")
	return true
}

// publishUnconfirmed writes msg on the non-confirming channel (confirms
// off, non-mandatory application publishes).
func (p *publishing) publishUnconfirmed(ctx context.Context, msg *transport.Message) error {
	set := p.pubs.Load()
	err := set.plain.Publish(ctx, msg, nil)
	if err != nil && errors.Is(err, transport.ErrNotWritten) && ctx.Err() == nil && p.refusal(msg) == nil && p.repairPublisher(ctx, set, set.plain) {
		err = p.pubs.Load().plain.Publish(ctx, msg, nil)
	}
	if err != nil {
		if errors.Is(err, transport.ErrNotWritten) {
			if uerr := unencodable(msg, err); uerr != nil {
				return uerr
			}
			if rerr := p.refusal(msg); rerr != nil {
				return rerr
			}
			if cerr := ctx.Err(); cerr != nil {
				return newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonStoppedBeforeWrite, cerr), false, cerr)
			}
			return newPaused(msg, reasonLostWaiting, "")
		}
		return newPubErr(msg, OutcomeFailed, writeFailedReason(err), true, err)
	}
	return nil
}

// hop publishes a library hop (retry, set-aside, PublishRaw): headers
// checked, confirmed whatever the confirm setting, waiting out a block or
// a recovery within ctx. It is a batch of one on the path Send takes.
func (p *publishing) hop(ctx context.Context, msg *transport.Message) error {
	if err := headerRefusal(msg); err != nil {
		return err
	}
	if err := p.awaitPublishable(ctx, msg, true); err != nil {
		return err
	}
	one := getOne()
	defer putOne(one)
	one.prs[0].msg = *msg
	one.prs[0].ctx = ctx
	p.publishAll(ctx, one.prs[:], one.errs[:], true)
	return one.errs[0]
}
