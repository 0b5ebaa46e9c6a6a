package acemq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

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
)

// Publish outcome words (contract §5.2).
const (
	OutcomeConfirmed  = "confirmed"
	OutcomePublished  = "published"
	OutcomeUnroutable = "unroutable"
	OutcomeRefused    = "refused"
	OutcomeFailed     = "failed"
)

func blockedReason(reason string) string {
	s := "the broker has blocked this connection; publishing is paused"
	if reason != "" {
		s += ": " + reason
	}
	return s + ". Nothing was sent; back off and retry once the broker unblocks"
}

func newPubErr(msg *transport.Message, outcome, reason string, sent bool, cause error) *PublishError {
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

func newPaused(msg *transport.Message, reason, brokerReason string) error {
	return &PublishingPausedError{
		PublishError: *newPubErr(msg, OutcomeRefused, reason, false, nil),
		BrokerReason: brokerReason,
	}
}

// refusal returns the error for a publish that must be declined before a
// permit or a byte, or nil when publishing is possible now.
func (c *Conn) refusal(msg *transport.Message) error {
	switch State(c.state.Load()) {
	case StateClosed:
		if p := c.gaveUpErr.Load(); p != nil {
			return newPubErr(msg, OutcomeRefused, reasonClosed, false, errors.Join(ErrClosed, *p))
		}
		return newPubErr(msg, OutcomeRefused, reasonClosed, false, ErrClosed)
	case StateLost:
		return newPaused(msg, reasonLostWaiting, "")
	case StateReopening:
		return newPaused(msg, reasonReopening, "")
	}
	if b := c.blocked.Load(); b != nil && b.active {
		return newPaused(msg, blockedReason(b.reason), b.reason)
	}
	return nil
}

// admit decides whether an application publish may go ahead now: nil, or
// the refusal. With WithWaitForRecovery a recovery (not a block) is waited
// out within ctx first, for Send and SendAll alike.
func (c *Conn) admit(ctx context.Context, msg *transport.Message) error {
	if !c.cfg.waitForRecovery {
		return c.refusal(msg)
	}
	return c.awaitPublishable(ctx, msg, false)
}

// awaitNoticedLoss reports whether a publish refused with err should be
// admitted again: with WithWaitForRecovery, one whose write found the
// connection gone before the Conn noticed (paused, nothing written, no
// broker block) waits until the Conn's state has changed since changed
// was taken, so that admission then waits out the recovery as it does for
// a publish made after the loss. It reports false when ctx ends first.
func (c *Conn) awaitNoticedLoss(ctx context.Context, err error, changed <-chan struct{}) bool {
	if !c.cfg.waitForRecovery || !IsPaused(err) || c.Blocked() {
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
// ctx has no deadline. Without WithWaitForRecovery nothing waits, so ctx
// is returned as is.
func (c *Conn) admissionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !c.cfg.waitForRecovery {
		return ctx, func() {}
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.confirmTimeout)
}

// awaitPublishable waits until a publish would not be refused, or until ctx
// ends. blockedToo makes it wait out a broker block as well as a recovery
// (hops); otherwise a block is refused at once (application publishes).
func (c *Conn) awaitPublishable(ctx context.Context, msg *transport.Message, blockedToo bool) error {
	for {
		changed := c.stateChanged()
		err := c.refusal(msg)
		if err == nil {
			return nil
		}
		st := c.State()
		if st == StateClosed {
			return err
		}
		if !blockedToo && st == StateOpen {
			// Open yet refused: a broker block, which an application publish
			// does not wait out — unless the recovery finished between the
			// two reads, so look once more rather than return a stale
			// "recovering" refusal.
			return c.refusal(msg)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return err
		}
	}
}

// pubWaiter waits for one confirmed publish's answer. Waiters are pooled:
// the channel, the timer and the bound callback are made once per waiter,
// not per publish. Owner rule: a waiter goes back to the pool only after
// its answer was taken from ch, because the transport calls done exactly
// once and never after that; a waiter abandoned on a timeout or a
// cancelled ctx is left to the garbage collector, since its answer may
// still come.
type pubWaiter struct {
	c    *Conn
	ch   chan transport.Confirmation
	t    *time.Timer
	done transport.ConfirmFunc // w.deliver, bound once
}

var waiterPool sync.Pool

func (c *Conn) getWaiter() *pubWaiter {
	w, _ := waiterPool.Get().(*pubWaiter)
	if w == nil {
		w = &pubWaiter{ch: make(chan transport.Confirmation, 1), t: time.NewTimer(time.Hour)}
		w.t.Stop()
		w.done = w.deliver
	}
	w.c = c
	return w
}

// putWaiter returns w to the pool; its answer has been taken.
func putWaiter(w *pubWaiter) {
	w.c = nil
	waiterPool.Put(w)
}

func (w *pubWaiter) deliver(cf transport.Confirmation) {
	w.c.permits.release()
	w.ch <- cf
}

// acquire takes one outstanding-publish permit, waiting at most the confirm
// timeout and ctx. Its failure is always a *PublishError (nothing was sent),
// typed so that callers need no errors.As.
func (c *Conn) acquire(ctx context.Context, msg *transport.Message) *PublishError {
	if c.permits.tryAcquire() {
		return nil
	}
	t := time.NewTimer(c.cfg.confirmTimeout)
	defer t.Stop()
	switch err := c.permits.acquire(ctx, t.C); err {
	case nil:
		return nil
	case errCeiling:
		return newPubErr(msg, OutcomeFailed, c.ceilingReason(), false, nil)
	default:
		return newPubErr(msg, OutcomeFailed, fmt.Sprintf("the caller stopped waiting for room to publish (%v); nothing was sent", err), false, err)
	}
}

func (c *Conn) ceilingReason() string {
	return fmt.Sprintf("%d publishes are already waiting for a confirm and none completed within %s. The broker is not keeping up; publish more slowly rather than buffering more.",
		c.cfg.maxOutstanding, c.cfg.confirmTimeout)
}

func (c *Conn) pickPublisher() (*pubSet, transport.Publisher) {
	set := c.pubs.Load()
	n := uint64(len(set.confirm))
	i := c.stats.rr.Add(1)
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
			// The broker closed the publishing channel, not the connection:
			// nothing was "remade", so say what happened.
			e := newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonChannelClosed, te.Code, te.Reason), true, cf.Err)
			e.ReplyCode = te.Code
			return e
		}
		return newPubErr(msg, OutcomeFailed, reasonLost, true, cf.Err)
	}
}

// writeConfirmed writes msg on a confirm channel with done as its callback
// and returns the transport's answer. A channel the broker closed while the
// connection stayed up (a publish to a missing exchange closes it with 404)
// is replaced and the write tried again, so one bad publish never leaves a
// dead channel in the round robin refusing every Nth publish.
func (c *Conn) writeConfirmed(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc) error {
	for try := 0; ; try++ {
		set, p := c.pickPublisher()
		err := p.Publish(ctx, msg, done)
		if err == nil || !errors.Is(err, transport.ErrNotWritten) {
			return err
		}
		if try >= 3 || ctx.Err() != nil || c.refusal(msg) != nil || !c.repairPublisher(ctx, set, p) {
			return err
		}
	}
}

// repairPublisher replaces old, a publisher of set whose channel ended,
// with a fresh one on the same publishing connection. It reports whether
// set's generation still has a live publisher in old's place; false when
// the connection itself is gone (recovery takes over) or reopening failed.
func (c *Conn) repairPublisher(ctx context.Context, set *pubSet, old transport.Publisher) bool {
	select {
	case <-old.Done():
	default:
		return false // it refused for another reason; do not churn
	}
	c.repairMu.Lock()
	defer c.repairMu.Unlock()
	cur := c.pubs.Load()
	if cur.gen != set.gen {
		return false
	}
	idx := -1
	for i, p := range cur.confirm {
		if p == old {
			idx = i
		}
	}
	if idx < 0 && cur.plain != old {
		return true // already replaced by a concurrent repair
	}
	c.mu.Lock()
	pc, gen := c.pubConn, c.gen
	c.mu.Unlock()
	if gen != set.gen || c.State() != StateOpen {
		return false
	}
	select {
	case <-pc.Done():
		return false
	default:
	}
	np, err := pc.Publisher(ctx, idx >= 0)
	if err != nil {
		c.logger.Warn("acemq: cannot reopen a publishing channel the broker closed", "error", err)
		return false
	}
	next := &pubSet{gen: cur.gen, confirm: append([]transport.Publisher(nil), cur.confirm...), plain: cur.plain}
	if idx >= 0 {
		next.confirm[idx] = np
	} else {
		next.plain = np
	}
	if !c.pubs.CompareAndSwap(cur, next) {
		_ = np.Close()
		return false
	}
	c.logger.Info("acemq: reopened a publishing channel the broker closed")
	return true
}

// publishConfirmed writes msg on a confirm channel and waits for the
// broker's answer, bounded by ctx and the confirm timeout. The caller has
// already passed the refusal checks. It returns nil only for an ack.
func (c *Conn) publishConfirmed(ctx context.Context, msg *transport.Message) error {
	if pe := c.acquire(ctx, msg); pe != nil {
		return pe
	}
	// Recovery may have begun while this publish waited for a permit.
	if err := c.refusal(msg); err != nil {
		c.permits.release()
		return err
	}
	w := c.getWaiter()
	if err := c.writeConfirmed(ctx, msg, w.done); err != nil {
		if errors.Is(err, transport.ErrNotWritten) {
			c.permits.release()
			putWaiter(w) // not written: done will never be called
			if rerr := c.refusal(msg); rerr != nil {
				return rerr
			}
			return newPaused(msg, reasonLostWaiting, "")
		}
		// The write may have happened: the transport still answers.
	}
	// The pooled timer was stopped (Go 1.23 timers: no stale tick).
	// No deferred Stop: once pooled the timer is another publish's.
	w.t.Reset(c.cfg.confirmTimeout)
	select {
	case cf := <-w.ch:
		w.t.Stop()
		putWaiter(w)
		return classify(msg, cf)
	case <-w.t.C:
		return newPubErr(msg, OutcomeFailed, fmt.Sprintf("the broker did not confirm it within %s, so it may have arrived; publish it again only if a duplicate is acceptable", c.cfg.confirmTimeout), true, nil)
	case <-ctx.Done():
		w.t.Stop()
		return newPubErr(msg, OutcomeFailed, fmt.Sprintf("the caller stopped waiting before the broker confirmed it (%v), so it may have arrived", ctx.Err()), true, ctx.Err())
	}
}

// publishUnconfirmed writes msg on the non-confirming channel (confirms
// off, non-mandatory application publishes).
func (c *Conn) publishUnconfirmed(ctx context.Context, msg *transport.Message) error {
	set := c.pubs.Load()
	err := set.plain.Publish(ctx, msg, nil)
	if err != nil && errors.Is(err, transport.ErrNotWritten) && ctx.Err() == nil && c.refusal(msg) == nil && c.repairPublisher(ctx, set, set.plain) {
		err = c.pubs.Load().plain.Publish(ctx, msg, nil)
	}
	if err != nil {
		if errors.Is(err, transport.ErrNotWritten) {
			if rerr := c.refusal(msg); rerr != nil {
				return rerr
			}
			return newPaused(msg, reasonLostWaiting, "")
		}
		return newPubErr(msg, OutcomeFailed, fmt.Sprintf("the write failed, so it may have arrived: %v", err), true, err)
	}
	return nil
}

// hop publishes a library hop: mandatory, confirmed whatever the confirm
// setting, waiting out a block or a recovery within ctx.
func (c *Conn) hop(ctx context.Context, msg *transport.Message) error {
	msg.Mandatory = true
	if err := headerRefusal(msg); err != nil {
		return err
	}
	if err := c.awaitPublishable(ctx, msg, true); err != nil {
		return err
	}
	return c.publishConfirmed(ctx, msg)
}
