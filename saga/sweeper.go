package saga

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// sweepLoop is the periodic sweep WithSweepEvery asks for, owned by the
// runner: started by NewRunner, stopped and waited for by Close.
type sweepLoop struct {
	every    time.Duration
	observer func([]Result, error)

	ctx    context.Context // cancelled when Close abandons the instance under way
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: no new sweep, no new instance
	done   chan struct{} // closed when the goroutine ended
}

// WithSweepEvery makes the runner sweep (see Runner.Sweep) every d, in a
// goroutine of its own started by NewRunner, until Close: a process that
// keeps such a runner finishes the instances a crashed process left
// running or compensating, once their lease expired, without calling
// Sweep itself. The first sweep is d after NewRunner, so Register the
// definitions to resume (and EnsureSchema) before then. Every runner
// sharing the database may sweep; each instance is claimed by one. A
// sweep's results and errors go to WithSweepObserver (errors are logged
// with slog.Default otherwise); a failed sweep is tried again d later.
// d under 10ms is refused; about a third of the lease is a good choice.
func WithSweepEvery(d time.Duration) Option {
	return func(r *Runner) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("acemq: saga sweep interval %v is too short; give at least 10ms (about a third of the lease is a good choice)", d)
		}
		if r.loop == nil {
			r.loop = &sweepLoop{}
		}
		r.loop.every = d
		return nil
	}
}

// WithSweepObserver hands every periodic sweep's (WithSweepEvery) results
// and joined errors to f, called from the sweeping goroutine after each
// sweep (also an empty one). f must not block for long: the next sweep
// waits for it. Without WithSweepEvery it has no effect.
func WithSweepObserver(f func(results []Result, err error)) Option {
	return func(r *Runner) error {
		if f == nil {
			return errors.New("acemq: saga.WithSweepObserver needs a function")
		}
		if r.loop == nil {
			r.loop = &sweepLoop{}
		}
		r.loop.observer = f
		return nil
	}
}

// startLoop starts the periodic sweep when WithSweepEvery asked for one.
func (r *Runner) startLoop() {
	l := r.loop
	if l == nil || l.every == 0 {
		r.loop = nil
		return
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTimer(l.every)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			results, err := r.sweep(l.ctx, l.stop, l.ctx)
			if l.observer != nil {
				l.observer(results, err)
			} else if err != nil {
				slog.Default().Warn("acemq: a periodic saga sweep failed; the next one tries again", "runner", r.owner, "error", err)
			}
			t.Reset(l.every)
		}
	}()
}

// Close stops the periodic sweep (WithSweepEvery) and waits for its
// goroutine. No sweep starts after Close, and the sweep under way stops
// after the instance it is carrying on. Close waits for that instance to
// end; when ctx ends first, it abandons it: the context of the action or
// compensation running is cancelled, nothing of that call is recorded
// (the instance stays running or compensating, never failed because of
// the shutdown), its lease is released so the next sweep of any runner
// re-runs the call, and Close returns, once the goroutine ended, an error
// wrapping ctx's. Actions and compensations must therefore return soon
// after their context is cancelled. Close does not affect Run or Sweep
// called directly. It is safe to call more than once and concurrently,
// and does nothing on a runner without WithSweepEvery.
func (r *Runner) Close(ctx context.Context) error {
	l := r.loop
	if l == nil {
		return nil
	}
	r.closeOnce.Do(func() { close(l.stop) })
	select {
	case <-l.done:
		l.cancel()
		return nil
	case <-ctx.Done():
	}
	l.cancel()
	<-l.done
	return fmt.Errorf("acemq: the saga runner's sweep was still carrying an instance on when Close's deadline passed; that instance was abandoned and its lease released, so the next sweep re-runs the interrupted call: %w", ctx.Err())
}
