package acemq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// EventKind names a connection event.
type EventKind string

// Connection events (behaviour §4.1).
const (
	EventLost      EventKind = "lost"
	EventRetrying  EventKind = "retrying"
	EventRecovered EventKind = "recovered"
	EventGaveUp    EventKind = "gave-up"
	EventBlocked   EventKind = "blocked"
	EventUnblocked EventKind = "unblocked"
)

// Event is a change in a Conn's connection to the broker.
type Event struct {
	Kind EventKind
	At   time.Time
	// Attempt numbers recovery attempts from 1 (retrying, recovered, gave-up).
	Attempt int
	// Err is the cause of a loss or of the last failed attempt.
	Err error
	// Reason is the broker's blocked reason.
	Reason string
	// Gap is how long publishing was unavailable (recovered only).
	Gap time.Duration
	// Skipped lists re-declarations the broker refused during recovery.
	Skipped []error
	// Fields holds the facts of an event raised through Emit by a package
	// over the Conn (see EventPipelineRunFinished); nil for the Conn's own.
	Fields map[string]string
}

// emit queues e for the event handler. It never blocks: events come from
// transport goroutines (and, on memory://, from inside a publish), which a
// slow handler must not stall.
func (c *Conn) emit(e Event) {
	q := c.events
	if q == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// eventQueue hands events to the handler in order, on one goroutine,
// without bounding (events are rare) and without blocking the emitter.
type eventQueue struct {
	mu     sync.Mutex
	items  []Event
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (c *Conn) dispatchEvents() {
	q := c.events
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, e := range items {
			func() {
				defer func() { _ = recover() }()
				c.cfg.onEvent(e)
			}()
		}
		if closed {
			close(q.done)
			return
		}
		if len(items) == 0 {
			<-q.wake
		}
	}
}

// stopEvents delivers what is queued, then stops the dispatcher.
func (c *Conn) stopEvents() {
	q := c.events
	if q == nil {
		return
	}
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// supervise watches both connections and runs recovery when either ends.
func (c *Conn) supervise() {
	defer close(c.superDone)
	for {
		c.mu.Lock()
		pc, cc := c.pubConn, c.conConn
		c.mu.Unlock()
		var cause error
		select {
		case <-c.closing.Done():
			return
		case <-pc.Done():
			cause = pc.Err()
		case <-cc.Done():
			cause = cc.Err()
		}
		select {
		case <-c.closing.Done():
			return
		default:
		}
		c.lose(pc, cc, cause)
		if !c.recover() {
			return
		}
	}
}

// lose enters the recovering state the moment a loss is noticed: the
// refusal window opens now, pending confirms fail now (the transport
// resolves them Lost as the channels end), the blocked state is cleared.
func (c *Conn) lose(pc, cc transport.Connection, cause error) {
	noticed := time.Now()
	c.lostAt.Store(noticed.UnixNano())
	c.blockTok.Store(nil) // ignore blocked notices from the lost connection
	c.blocked.Store(nil)
	c.setState(StateLost)
	// Both at once, each bounded: when only one connection was lost the
	// other may be blocked by the broker, which then never answers a close.
	closeBoth(pc, cc, loseCloseWait)
	if cause == nil {
		cause = errors.New("the connection ended")
	}
	c.logger.Warn("acemq: the connection to the broker was lost; recovering", "url", c.redacted, "cause", cause)
	// The event carries the moment the loss was noticed, not the moment
	// the old connections finished closing.
	c.emit(Event{Kind: EventLost, At: noticed, Err: cause})
}

// recover retries until the connection is back, Close is called, or the
// attempt cap is reached. It reports whether the Conn is open again.
func (c *Conn) recover() bool {
	delay := c.cfg.recoveryInterval
	refused := false
	var lastErr error
	for attempt := 1; ; attempt++ {
		if !c.waitRetry(delay, refused) {
			return false
		}
		c.emit(Event{Kind: EventRetrying, Attempt: attempt, Err: lastErr})
		ctx, cancel := c.closingContext()
		var took restoreTimes
		skipped, err := c.reconnect(ctx, &took)
		cancel()
		if err == nil {
			gap := time.Since(time.Unix(0, c.lostAt.Load()))
			c.logger.Info("acemq: recovered the connection to the broker", "attempt", attempt, "gap", gap,
				"connect", took.dial, "declarations", took.decls, "redeclare", took.redeclare,
				"consumers", took.consumers, "channels", took.open, "reattach", took.reattach)
			c.emit(Event{Kind: EventRecovered, Attempt: attempt, Gap: gap, Skipped: skipped})
			return true
		}
		select {
		case <-c.closing.Done():
			return false
		default:
		}
		c.logger.Warn("acemq: a recovery attempt failed", "attempt", attempt, "error", err)
		lastErr = err
		if c.cfg.recoveryAttempts > 0 && attempt >= c.cfg.recoveryAttempts {
			gerr := fmt.Errorf("acemq: recovery gave up after %d attempts: %w", attempt, err)
			c.gaveUpErr.Store(&gerr)
			c.emit(Event{Kind: EventGaveUp, Attempt: attempt, Err: gerr})
			c.logger.Error("acemq: recovery gave up; the connection is closed", "attempts", attempt, "error", err)
			c.setState(StateClosed)
			c.failConsumers()
			c.markDone()
			return false
		}
		// A refused TCP connect costs the broker nothing, so while nothing
		// listens we keep the base interval and, in between, probe the
		// port (waitRetry): publishing resumes within a probe step of the
		// broker accepting connections. Any other failure (the broker
		// answered) backs off, doubling to the cap.
		refused = isConnRefused(err)
		if !refused {
			delay *= 2
			if delay > c.cfg.recoveryMax {
				delay = c.cfg.recoveryMax
			}
		}
	}
}

// probeEvery is how often waitRetry knocks on a port that refused us.
const probeEvery = 20 * time.Millisecond

// waitRetry waits d before the next recovery attempt. After an attempt the
// broker's host refused (nothing listening: a restart), and when the
// transport can probe (transport.Prober), it also probes every probeEvery
// and ends the wait as soon as the broker accepts connections, so the next
// attempt starts the moment it listens again rather than up to an interval
// later. It returns false when Close began.
func (c *Conn) waitRetry(d time.Duration, refused bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	prober, ok := c.driver.(transport.Prober)
	if !refused || !ok {
		select {
		case <-t.C:
			return true
		case <-c.closing.Done():
			return false
		}
	}
	ctx, cancel := c.closingContext()
	defer cancel()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-c.closing.Done():
			return false
		case <-tick.C:
			if prober.Probe(ctx, c.tcfg) {
				return true
			}
		}
	}
}

func isConnRefused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && errors.Is(op.Err, syscall.ECONNREFUSED)
}

// closingContext returns a context cancelled when Close starts or when
// the returned cancel is called. It starts no goroutine: it derives from
// the Conn's own closing context.
func (c *Conn) closingContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(c.closing)
}

// restoreTimes says what a successful recovery attempt restored and how
// long each step took, for the recovered log line.
type restoreTimes struct {
	dial, redeclare, open, reattach time.Duration
	decls, consumers                int
}

// reconnect dials, then restores in order: publishing channels, every
// declaration, every consumer; only then does publishing reopen. The
// consumers' channels are opened (with their prefetch) while the
// declarations are restored, which needs nothing declared; each consumer
// subscribes only once every declaration is back. It fills took as it
// goes.
func (c *Conn) reconnect(ctx context.Context, took *restoreTimes) ([]error, error) {
	t0 := time.Now()
	c.mu.Lock()
	start := c.addrIndex + 1
	if len(c.tcfg.Addresses) <= 1 {
		start = 0
	} else {
		start %= len(c.tcfg.Addresses)
	}
	c.mu.Unlock()
	if err := c.dial(ctx, start); err != nil {
		return nil, err
	}
	t1 := time.Now()
	took.dial = t1.Sub(t0)
	c.setState(StateReopening)
	c.mu.Lock()
	decls := append([]Declaration(nil), c.decls...)
	c.mu.Unlock()
	consumers := c.consumerList()
	took.decls, took.consumers = len(decls), len(consumers)

	// The consumers' channels open beside the re-declaration, on a
	// goroutine this function starts and waits for on every path.
	chans := make([]transport.Channel, len(consumers))
	octx, stopOpening := context.WithCancel(ctx)
	opened := make(chan error, 1)
	go func() {
		opened <- inParallel(octx, len(consumers), attachWidth, func(ctx context.Context, _, i int) error {
			ch, err := consumers[i].openChannel(ctx)
			chans[i] = ch
			return err
		})
	}()
	skipped, err := c.redeclare(ctx, decls)
	took.redeclare = time.Since(t1)
	if err != nil {
		stopOpening()
	}
	openErr := <-opened
	stopOpening()
	took.open = time.Since(t1)
	if err == nil {
		err = openErr
	}
	if err != nil {
		c.abandon() // which ends the channels opened for consumers too
		return nil, err
	}
	t2 := time.Now()
	if err := c.reattach(ctx, consumers, chans); err != nil {
		c.abandon()
		return nil, err
	}
	took.reattach = time.Since(t2)
	c.setState(StateOpen)
	return skipped, nil
}

// redeclare declares decls again on the new connection: exchanges, then
// queues, then bindings, each kind split over recoveryWidth channels that
// work at once. A channel that offers transport.Pipeliner sends its share
// without waiting for each answer and waits once; when that fails (a
// refusal, an exclusive queue not reaped yet) its share is declared again
// one by one, which says what was refused. It returns the refusals it
// skipped, in declaration order, or the error that ends this attempt.
func (c *Conn) redeclare(ctx context.Context, decls []Declaration) ([]error, error) {
	refused := make([]error, len(decls))
	for _, kind := range []DeclKind{DeclExchange, DeclQueue, DeclBinding} {
		var idx []int
		for i, d := range decls {
			if d.Kind == kind {
				idx = append(idx, i)
			}
		}
		width := recoveryWidth
		if width > len(idx) {
			width = len(idx)
		}
		err := inParallel(ctx, width, width, func(ctx context.Context, _, w int) error {
			var share []int
			for j := w; j < len(idx); j += width {
				share = append(share, idx[j])
			}
			if c.pipelined(ctx, decls, share) {
				return nil
			}
			dc := declarer{open: c.channel}
			defer dc.close()
			for _, i := range share {
				skip, err := c.redeclareOne(ctx, &dc, decls[i])
				if err != nil {
					return err
				}
				refused[i] = skip
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var skipped []error
	for _, err := range refused {
		if err != nil {
			skipped = append(skipped, err)
		}
	}
	return skipped, nil
}

// pipelined declares decls[share] on one channel without waiting for each
// answer, and reports whether the broker accepted every one. False means
// nothing is known: the caller declares them again one by one.
func (c *Conn) pipelined(ctx context.Context, decls []Declaration, share []int) bool {
	ch, err := c.channel(ctx)
	if err != nil {
		return false
	}
	defer ch.Close()
	p, ok := ch.(transport.Pipeliner)
	if !ok {
		return false
	}
	for _, i := range share {
		d := decls[i]
		switch d.Kind {
		case DeclExchange:
			err = p.DeclareExchangeNoWait(d.Exchange)
		case DeclQueue:
			if d.Queue.Name == "" {
				return false
			}
			err = p.DeclareQueueNoWait(d.Queue)
		case DeclBinding:
			err = p.BindQueueNoWait(d.Binding)
		}
		if err != nil {
			return false
		}
	}
	return p.Sync(ctx) == nil
}

// redeclareOne declares d on dc. It returns the broker's refusal when the
// declaration is skipped, or an error that ends the recovery attempt.
func (c *Conn) redeclareOne(ctx context.Context, dc *declarer, d Declaration) (skipped, fatal error) {
	for try := 0; ; try++ {
		err := dc.declare(ctx, d, false)
		if err == nil {
			return nil, nil
		}
		err = fmt.Errorf("acemq: the broker refused to declare %s: %w", describeDecl(d), err)
		code := transport.Code(err)
		if code == transport.CodeResourceLocked && try < 5 {
			// The old connection's exclusive queue is not reaped yet.
			if sleepCtx(ctx, time.Duration(try+1)*200*time.Millisecond) != nil {
				return nil, ctx.Err()
			}
			continue
		}
		// 404 on a re-declaration means what it names is unavailable,
		// not wrong: in a cluster, a classic queue whose home node is
		// the one lost ("home node ... is down or inaccessible") or
		// whose process is stopping. It returns with its node; holding
		// every other queue, consumer and publish back until then would
		// turn one node's loss into an outage. Skipped and reported.
		if code == transport.CodePreconditionFailed || code == transport.CodeAccessRefused || code == transport.CodeNotFound {
			c.logger.Error("acemq: the broker refused a re-declaration during recovery; skipped", "error", err)
			return err, nil
		}
		return nil, err
	}
}

// reattach subscribes every consumer again, each on its channel from
// openChannel (chans[i] for consumers[i]), attachWidth at a time. A
// consumer whose queue is gone (404) is marked stalled and left to its
// re-subscriber; any other failure ends this recovery attempt (and the
// caller abandons the connection, which ends the channels not used).
func (c *Conn) reattach(ctx context.Context, consumers []*consumerCore, chans []transport.Channel) error {
	return inParallel(ctx, len(consumers), attachWidth, func(ctx context.Context, _, i int) error {
		k := consumers[i]
		if err := k.attachChannel(ctx, chans[i]); err != nil {
			if transport.Code(err) == transport.CodeNotFound {
				k.markStalled(err)
				return nil
			}
			return err
		}
		return nil
	})
}

// abandon closes a half-restored connection so the next attempt starts clean.
func (c *Conn) abandon() {
	c.mu.Lock()
	pc, cc := c.pubConn, c.conConn
	c.mu.Unlock()
	c.blockTok.Store(nil)
	closeBoth(pc, cc, loseCloseWait)
	c.setState(StateLost)
}

// loseCloseWait bounds the close handshake of connections being given up.
// The publishes still waiting on them are answered (lost) only when they
// end, and must be within 100ms of the loss (behaviour §4.1), so a peer
// that does not answer at once (partitioned, or blocked by an alarm) has
// its socket dropped instead.
const loseCloseWait = 25 * time.Millisecond

// closeBoth closes the two connections concurrently, each within d.
func closeBoth(pc, cc transport.Connection, d time.Duration) {
	done := make(chan struct{})
	go func() {
		_ = transport.CloseWithin(cc, d)
		close(done)
	}()
	_ = transport.CloseWithin(pc, d)
	<-done
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Conn) failConsumers() {
	for _, cc := range c.consumerList() {
		cc.markStalled(ErrClosed)
	}
}

// Close drains every consumer concurrently under one deadline (the drain
// timeout, or ctx's earlier deadline), waits within the same deadline for
// outstanding confirms, then closes both connections. Deliveries prefetched
// but not started go back to the broker unrun. It returns nil or a
// *DrainTimeoutError naming what was left unsettled (it will be
// redelivered), joined with ctx's error if ctx ended first. Close is
// idempotent: later calls return the first call's result.
func (c *Conn) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.closeErr = c.close(ctx)
		close(c.closed)
	})
	<-c.closed
	return c.closeErr
}

func (c *Conn) close(ctx context.Context) error {
	wasClosed := c.State() == StateClosed
	if !wasClosed {
		c.setState(StateClosing)
	}
	timeout := c.cfg.drainTimeout
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		// The error names the deadline actually used, not the configured one.
		deadline = d
		timeout = time.Until(d).Round(time.Millisecond)
	}
	consumers := c.consumerList()
	drainErr := drainAll(ctx, consumers, deadline, timeout)

	// Publishing stayed open for the consumers' hops; now wait (within the
	// same deadline) for outstanding confirms.
	c.permits.waitIdle(ctx, deadline)
	c.setState(StateClosed)
	c.markDone()
	c.beginStop()
	<-c.superDone
	c.mu.Lock()
	pc, cc := c.pubConn, c.conConn
	c.mu.Unlock()
	// The publishing channels end with their connection; closing them one
	// by one first would wait on a handshake a blocked broker never reads.
	// A graceful close, but bounded by the caller's deadline (at least
	// loseCloseWait): a connection the broker blocked never answers.
	wait := time.Until(deadline)
	if wait < loseCloseWait {
		wait = loseCloseWait
	}
	closeBoth(pc, cc, wait)
	c.stopEvents()
	var errs []error
	if drainErr != nil {
		errs = append(errs, drainErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// consumerList snapshots the registered consumers.
func (c *Conn) consumerList() []*consumerCore {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*consumerCore, 0, len(c.consumers))
	for cc := range c.consumers {
		out = append(out, cc)
	}
	return out
}
