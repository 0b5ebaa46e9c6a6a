package saga

import (
	"context"
	"sync"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

// lease keeps an execution's lease while it runs. It renews the lease
// every quarter of it, and its context ends, cancelling the call under
// way, at three quarters of a lease after the newest write that extended
// the lease started, unless another did meanwhile, or at once when a
// renewal finds the instance taken over. The database sets locked_until
// to its own now plus a lease when such a write runs, later than the
// write started, so a runner that stops at three quarters has stopped a
// quarter of a lease before any other runner can take the instance,
// whatever its clock says (clocks only need to tick at the same rate).
type lease struct {
	x      *execution
	ctx    context.Context // ends, with the reason as its cause, when the lease is lost
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	held       time.Time // when the newest write that extended the lease started
	stopMargin func() bool
	stopped    bool

	tick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// keep starts keeping the lease taken by a write that started at held.
func (x *execution) keep(held time.Time) *lease {
	l := &lease{x: x, tick: make(chan struct{}, 1), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.extended(held)
	l.wg.Add(1)
	go l.renewing()
	return l
}

// margin is how long after the newest extending write started the runner
// stops: three quarters of the lease.
func (l *lease) margin() time.Duration { return l.x.r.lease * 3 / 4 }

// extended records a write that extended the lease to a full one; it
// started at start.
func (l *lease) extended(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.ctx.Err() != nil || !start.After(l.held) {
		return
	}
	l.held = start
	if l.stopMargin != nil {
		l.stopMargin()
	}
	clock := l.x.r.clock
	l.stopMargin = clock.AfterFunc(start.Add(l.margin()).Sub(clock.Now()), l.expire)
}

// expire ends the lease's context when the margin passed with no newer
// extending write.
func (l *lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.x.r.clock.Now().Before(l.held.Add(l.margin())) {
		return // stopped, or extended since the timer was set
	}
	l.cancel(errLeaseMargin)
}

// lost returns why the lease was lost, or nil.
func (l *lease) lost() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// renewing renews the lease every quarter of it until stop, or until the
// lease is lost. A renewal that fails is tried again at the next quarter;
// the margin stops the run when none goes through.
func (l *lease) renewing() {
	defer l.wg.Done()
	r := l.x.r
	next := func() func() bool {
		return r.clock.AfterFunc(r.lease/4, func() {
			select {
			case l.tick <- struct{}{}:
			default:
			}
		})
	}
	stopTick := next()
	defer func() { stopTick() }()
	for {
		select {
		case <-l.done:
			return
		case <-l.ctx.Done():
			return
		case <-l.tick:
		}
		stopTick = next() // a quarter after this one started, however long it takes
		if r.beforeRenew != nil {
			r.beforeRenew()
		}
		l.renew()
		if r.afterRenew != nil {
			r.afterRenew()
		}
	}
}

// renew extends the lease once.
func (l *lease) renew() {
	r, x := l.x.r, l.x
	start := r.clock.Now()
	q, args := r.bind(`UPDATE acemq_saga SET locked_until = {now} + ?, version = version + 1 WHERE instance_id = ? AND locked_by = ?`,
		r.lease.Milliseconds(), x.id, x.token)
	res, err := r.db.ExecContext(l.ctx, q, args...) // until the margin, when the lease is lost anyway
	if err != nil {
		return
	}
	n, err := sqlstore.RowsAffected(res)
	switch {
	case err != nil:
	case n == 0:
		l.cancel(errTakenOver)
	default:
		l.extended(start)
	}
}

// stop stops renewing and waits for the renewing goroutine.
func (l *lease) stop() {
	l.mu.Lock()
	l.stopped = true
	if l.stopMargin != nil {
		l.stopMargin()
	}
	l.mu.Unlock()
	close(l.done)
	l.wg.Wait()
	l.cancel(nil)
}
