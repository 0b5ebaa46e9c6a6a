package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// State is where a Conn is in its life.
type State int32

// Conn states.
const (
	// StateOpen: connected; publishing and consuming.
	StateOpen State = iota
	// StateLost: the connection was lost and waits for a recovery attempt.
	StateLost
	// StateReopening: a new connection is up and its channels, topology
	// and consumers are being restored.
	StateReopening
	// StateClosing: Close is draining consumers.
	StateClosing
	// StateClosed: closed, by Close or because recovery gave up.
	StateClosed
)

// String names the state.
func (s State) String() string {
	switch s {
	case StateOpen:
		return "open"
	case StateLost:
		return "lost"
	case StateReopening:
		return "reopening"
	case StateClosing:
		return "closing"
	case StateClosed:
		return "closed"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// lifecycle is a Conn's life: its state (and a signal at every change), the
// supervisor that notices a loss and recovers, and Close. It owns one
// goroutine, the supervisor, started by start and waited for by close. It
// reaches the other parts only through their methods: links (the broker
// connections), publishing (its channels and blocked state), declared
// (what to declare again) and consumerSet (whom to re-attach and drain).
type lifecycle struct {
	cfg       *config // read only: recovery and drain settings
	logger    *slog.Logger
	links     *links
	pub       *publishing
	decls     *declared
	consumers *consumerSet
	events    *events

	state     atomic.Int32
	mu        sync.Mutex
	changed   chan struct{} // closed at the next state or blocked change
	closing   context.Context
	beginStop context.CancelFunc // ends closing: Close has begun
	superDone chan struct{}      // the supervisor returned
	done      chan struct{}      // see Conn.Done
	doneOnce  sync.Once
	closeOnce sync.Once
	closed    chan struct{} // Close's result is ready
	closeErr  error
	gaveUp    atomic.Pointer[error]
	lostAt    atomic.Int64
}

func newLifecycle(cfg *config, logger *slog.Logger, l *links, pub *publishing, decls *declared, consumers *consumerSet, ev *events) *lifecycle {
	lc := &lifecycle{
		cfg: cfg, logger: logger, links: l, pub: pub, decls: decls, consumers: consumers, events: ev,
		changed:   make(chan struct{}),
		superDone: make(chan struct{}),
		done:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	lc.closing, lc.beginStop = context.WithCancel(context.Background())
	return lc
}

// current is the state now.
func (l *lifecycle) current() State { return State(l.state.Load()) }

// set moves to s and signals the change.
func (l *lifecycle) set(s State) {
	l.mu.Lock()
	l.state.Store(int32(s))
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// changes returns a channel closed at the next state or blocked change.
func (l *lifecycle) changes() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// broadcast signals a change that is not a state change (a block).
func (l *lifecycle) broadcast() {
	l.mu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *lifecycle) markDone() { l.doneOnce.Do(func() { close(l.done) }) }

// gaveUpErr is why recovery gave up, or nil.
func (l *lifecycle) gaveUpErr() error {
	if p := l.gaveUp.Load(); p != nil {
		return *p
	}
	return nil
}

// closingContext returns a context cancelled when Close starts or when
// the returned cancel is called. It starts no goroutine.
func (l *lifecycle) closingContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(l.closing)
}

// channel opens a throwaway channel on the consuming connection.
func (l *lifecycle) channel(ctx context.Context) (transport.Channel, error) {
	if l.current() == StateClosed {
		return nil, ErrClosed
	}
	return l.links.channel(ctx)
}

// connect dials from address start, opens the publishing channels and
// makes the pair current. It does not touch consumers or declarations.
func (l *lifecycle) connect(ctx context.Context, start int) error {
	pc, cc, idx, err := l.links.dial(ctx, start, l.pub.blockedNotices())
	if err != nil {
		return err
	}
	set, err := l.pub.openPublishers(ctx, pc)
	if err != nil {
		_ = pc.Close()
		_ = cc.Close()
		return err
	}
	l.pub.install(set, l.links.adopt(pc, cc, idx))
	return nil
}

// start opens the Conn for use and starts the supervisor.
func (l *lifecycle) start() {
	l.state.Store(int32(StateOpen))
	go l.supervise()
}

// abort undoes newLifecycle after a failed first dial.
func (l *lifecycle) abort() {
	l.events.stop()
	l.beginStop()
}

// supervise watches both connections and runs recovery when either ends.
func (l *lifecycle) supervise() {
	defer close(l.superDone)
	for {
		pc, cc := l.links.current()
		var cause error
		select {
		case <-l.closing.Done():
			return
		case <-pc.Done():
			cause = pc.Err()
		case <-cc.Done():
			cause = cc.Err()
		}
		select {
		case <-l.closing.Done():
			return
		default:
		}
		l.lose(pc, cc, cause)
		if !l.recover() {
			return
		}
	}
}

// lose enters the recovering state the moment a loss is noticed: the
// refusal window opens now, pending confirms fail now (the transport
// resolves them Lost as the channels end), the blocked state is cleared.
func (l *lifecycle) lose(pc, cc transport.Connection, cause error) {
	noticed := time.Now()
	l.lostAt.Store(noticed.UnixNano())
	l.pub.forgetBlocked()
	l.set(StateLost)
	// Both at once, each bounded: when only one connection was lost the
	// other may be blocked by the broker, which then never answers a close.
	closeBoth(pc, cc, loseCloseWait)
	if cause == nil {
		cause = errors.New("the connection ended")
	}
	l.logger.Warn("acemq: the connection to the broker was lost; recovering", "url", l.links.redacted, "cause", cause)
	// The event carries the moment the loss was noticed, not the moment
	// the old connections finished closing.
	l.events.emit(Event{Kind: EventLost, At: noticed, Err: cause})
}

// recover retries until the connection is back, Close is called, or the
// attempt cap is reached. It reports whether the Conn is open again.
func (l *lifecycle) recover() bool {
	delay := l.cfg.recoveryInterval
	refused := false
	var lastErr error
	for attempt := 1; ; attempt++ {
		if !l.waitRetry(jitter(delay), refused) {
			return false
		}
		l.events.emit(Event{Kind: EventRetrying, Attempt: attempt, Err: lastErr})
		ctx, cancel := l.closingContext()
		var took restoreTimes
		skipped, err := l.reconnect(ctx, &took)
		cancel()
		if err == nil {
			gap := time.Since(time.Unix(0, l.lostAt.Load()))
			l.logger.Info("acemq: recovered the connection to the broker", "attempt", attempt, "gap", gap,
				"connect", took.dial, "declarations", took.decls, "redeclare", took.redeclare,
				"consumers", took.consumers, "channels", took.open, "reattach", took.reattach)
			l.events.emit(Event{Kind: EventRecovered, Attempt: attempt, Gap: gap, Skipped: skipped})
			return true
		}
		select {
		case <-l.closing.Done():
			return false
		default:
		}
		l.logger.Warn("acemq: a recovery attempt failed", "attempt", attempt, "error", err)
		lastErr = err
		if l.cfg.recoveryAttempts > 0 && attempt >= l.cfg.recoveryAttempts {
			gerr := fmt.Errorf("acemq: recovery gave up after %d attempts: %w", attempt, err)
			l.gaveUp.Store(&gerr)
			l.events.emit(Event{Kind: EventGaveUp, Attempt: attempt, Err: gerr})
			l.logger.Error("acemq: recovery gave up; the connection is closed", "attempts", attempt, "error", err)
			l.set(StateClosed)
			for _, k := range l.consumers.list() {
				k.markStalled(ErrClosed)
			}
			l.markDone()
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
			if delay > l.cfg.recoveryMax {
				delay = l.cfg.recoveryMax
			}
		}
	}
}

// waitRetry waits d before the next recovery attempt. After an attempt the
// broker's host refused (nothing listening: a restart), and when the
// transport can probe (transport.Prober), it also probes about every
// probeEvery (probeWait, jittered) and, once the broker accepts
// connections, ends the wait after a random share of reconnectSpread
// (spreadWait), so the next attempt starts soon after it listens again
// rather than up to an interval later, and a fleet of clients does not
// start it in the same instant. It returns false when Close began.
func (l *lifecycle) waitRetry(d time.Duration, refused bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	prober, ok := l.links.driver.(transport.Prober)
	if !refused || !ok {
		select {
		case <-t.C:
			return true
		case <-l.closing.Done():
			return false
		}
	}
	ctx, cancel := l.closingContext()
	defer cancel()
	knock := time.NewTimer(probeWait())
	defer knock.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-l.closing.Done():
			return false
		case <-knock.C:
			if !prober.Probe(ctx, l.links.tcfg) {
				knock.Reset(probeWait())
				continue
			}
			t.Reset(spreadWait())
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
func (l *lifecycle) reconnect(ctx context.Context, took *restoreTimes) ([]error, error) {
	t0 := time.Now()
	if err := l.connect(ctx, l.links.nextStart()); err != nil {
		return nil, err
	}
	t1 := time.Now()
	took.dial = t1.Sub(t0)
	l.set(StateReopening)
	decls := l.decls.list()
	consumers := l.consumers.list()
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
	rd := redeclarer{open: l.channel, report: func(err error) {
		l.logger.Error("acemq: the broker refused a re-declaration during recovery; skipped", "error", err)
	}}
	skipped, err := rd.redeclare(ctx, decls)
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
		l.abandon() // which ends the channels opened for consumers too
		return nil, err
	}
	t2 := time.Now()
	if err := reattach(ctx, consumers, chans); err != nil {
		l.abandon()
		return nil, err
	}
	took.reattach = time.Since(t2)
	l.set(StateOpen)
	return skipped, nil
}

// reattach subscribes every consumer again, each on its channel from
// openChannel (chans[i] for consumers[i]), attachWidth at a time. A
// consumer the broker refuses on its own channel (its queue gone, 404; a
// stream with no replica on this node yet, 406; a queue in exclusive use,
// 403 or 405) is marked stalled and left to its re-subscriber, so one
// consumer does not hold up the rest of the Conn; any other failure ends
// this recovery attempt (and the caller abandons the connection, which
// ends the channels not used).
func reattach(ctx context.Context, consumers []*consumerCore, chans []transport.Channel) error {
	return inParallel(ctx, len(consumers), attachWidth, func(ctx context.Context, _, i int) error {
		k := consumers[i]
		if err := k.attachChannel(ctx, chans[i]); err != nil {
			if channelRefusal(err) {
				k.markStalled(err)
				return nil
			}
			return err
		}
		return nil
	})
}

// channelRefusal reports whether err is the broker closing one channel
// (not the connection) with a reply code: a refusal of what was asked on
// that channel, which leaves the connection usable.
func channelRefusal(err error) bool {
	var e *transport.Error
	return errors.As(err, &e) && e.Server && !e.Connection && e.Code != 0
}

// abandon closes a half-restored connection so the next attempt starts clean.
func (l *lifecycle) abandon() {
	l.pub.forgetBlocked()
	l.links.closeCurrent(loseCloseWait)
	l.set(StateLost)
}

// close drains every consumer concurrently under one deadline (the drain
// timeout, or ctx's earlier deadline), waits within the same deadline for
// outstanding confirms, stops the supervisor, then closes both
// connections and the event dispatcher. Later calls return the first
// call's result.
func (l *lifecycle) close(ctx context.Context) error {
	l.closeOnce.Do(func() {
		l.closeErr = l.drainAndClose(ctx)
		close(l.closed)
	})
	<-l.closed
	return l.closeErr
}

func (l *lifecycle) drainAndClose(ctx context.Context) error {
	if l.current() != StateClosed {
		l.set(StateClosing)
	}
	timeout := l.cfg.drainTimeout
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		// The error names the deadline actually used, not the configured one.
		deadline = d
		timeout = time.Until(d).Round(time.Millisecond)
	}
	drainErr := drainAll(ctx, l.consumers.list(), deadline, timeout)

	// Publishing stayed open for the consumers' hops; now wait (within the
	// same deadline) for outstanding confirms.
	l.pub.waitIdle(ctx, deadline)
	l.set(StateClosed)
	l.markDone()
	l.beginStop()
	<-l.superDone
	// The publishing channels end with their connection; closing them one
	// by one first would wait on a handshake a blocked broker never reads.
	// A graceful close, but bounded by the caller's deadline (at least
	// loseCloseWait): a connection the broker blocked never answers.
	wait := time.Until(deadline)
	if wait < loseCloseWait {
		wait = loseCloseWait
	}
	l.links.closeCurrent(wait)
	l.events.stop()
	var errs []error
	if drainErr != nil {
		errs = append(errs, drainErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}
