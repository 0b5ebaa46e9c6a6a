package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// A broker that stops reading (its process stalled, a path that drops
// packets, a node paused by a partition) fills the socket buffers, and a
// write then blocks until the connection is dropped. writeWatch bounds such
// writes by the contexts of the callers waiting on them, as pgconn's
// ctxwatch turns a context into a socket deadline, at no cost to a write
// that does not block: while writes with a context that can end are being
// made, one probe timer per connection ticks every probeAfter (started when
// such writes begin after a pause, not per write, and stopped at the first
// tick that finds no write under way); a write it finds under way at two
// ticks in a row is slow, and only then is each watched context given a
// context.AfterFunc. When one of those contexts ends, the
// socket's write deadline is put in the past: the blocked write returns,
// and since part of a frame may be on the wire the stream is no longer
// framed, so the connection is finished (cut). A write that finds the
// connection cut writes nothing.
//
// Close bounds the writes too (closeBy): the socket's write deadline is set
// before anything else, so a close never waits for a blocked writer to
// give up on its own, as amqp091-go's CloseDeadline does.
//
// Watched contexts are the writer's own, for the length of its socket
// write (the owned connection), and, with frames=amqp091, each publish
// call's for the length of the call: amqp091-go writes on the caller's
// goroutine, behind its own lock, so the call is what a context bounds.
type writeWatch struct {
	conn net.Conn

	mu      sync.Mutex
	calls   []watched
	next    uint64
	writing bool   // a socket write is in progress
	writes  uint64 // socket writes begun
	seen    uint64 // writes at the probe's last tick
	slow    bool   // the write in progress has been, for a tick or more
	probing bool   // the probe timer is running
	probe   *time.Timer
	cut     error     // why the writes were cut; every later write fails with it
	closeAt time.Time // the close's write deadline, once a close has begun
}

// watched is one context being watched; stop is its AfterFunc's, once
// armed.
type watched struct {
	id   uint64
	ctx  context.Context
	stop func() bool
}

// probeAfter is the probe's tick: a write under way at two ticks in a row
// (between probeAfter and twice that) arms the contexts waiting on it, so
// it bounds how far past its deadline a blocked write can run.
const probeAfter = 10 * time.Millisecond

// aLongTimeAgo is a write deadline in the past: it ends a blocked write
// at once.
var aLongTimeAgo = time.Unix(1, 0)

// errWaited wraps the context error of a caller that gave up before its
// bytes were written: nothing of them went, and the connection goes on.
type errWaited struct{ err error }

func (e *errWaited) Error() string {
	return fmt.Sprintf("rabbitmq: the caller's context ended before the socket was free to write (%v); nothing was written", e.err)
}

func (e *errWaited) Unwrap() error { return e.err }

// ended reports whether ctx has ended, without the lock ctx.Err takes (a
// publishing goroutine's context is often shared by many).
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// isWaited reports whether err is a caller giving up before writing.
func isWaited(err error) bool {
	var w *errWaited
	return errors.As(err, &w)
}

// write writes b to conn, giving up when ctx ends while the write is
// blocked (see writeWatch); n is what went, as io.Writer says. A ctx that
// has ended already, or a connection already cut, writes nothing.
func (w *writeWatch) write(ctx context.Context, conn net.Conn, b []byte) (int, error) {
	done := ctx.Done()
	if ended(ctx) {
		return 0, &errWaited{ctx.Err()}
	}
	w.mu.Lock()
	if w.cut != nil {
		err := w.cut
		w.mu.Unlock()
		return 0, err
	}
	var id uint64
	if done != nil {
		id = w.addLocked(ctx)
	}
	w.writing = true
	w.writes++
	if len(w.calls) > 0 {
		w.startProbeLocked()
	}
	w.mu.Unlock()

	n, err := conn.Write(b)

	w.mu.Lock()
	w.writing, w.slow = false, false
	stop := w.removeLocked(id)
	cut, closing := w.cut, !w.closeAt.IsZero()
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	if err != nil {
		switch {
		case cut != nil:
			err = cut
		case closing && errors.Is(err, os.ErrDeadlineExceeded):
			err = fmt.Errorf("rabbitmq: the connection was closed while a write the broker was not reading was blocked: %w", err)
		}
	}
	return n, err
}

// begin watches ctx until end is called with the id it returns (0, and
// nothing watched, when ctx cannot end): while it is watched, ctx ending
// during a blocked write cuts the connection's writes.
func (w *writeWatch) begin(ctx context.Context) uint64 {
	if ctx.Done() == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.addLocked(ctx)
	if w.writing {
		w.startProbeLocked()
	}
	return id
}

// end stops watching the context begin returned id for; it returns the
// reason the writes were cut, if they were.
func (w *writeWatch) end(id uint64) error {
	w.mu.Lock()
	stop := w.removeLocked(id)
	cut := w.cut
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	return cut
}

// closeBy bounds every write from now on, and the one in progress, by t.
func (w *writeWatch) closeBy(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closeAt.IsZero() || t.Before(w.closeAt) {
		w.closeAt = t
	}
	if w.cut == nil {
		_ = w.conn.SetWriteDeadline(w.closeAt)
	}
}

func (w *writeWatch) addLocked(ctx context.Context) uint64 {
	w.next++
	w.calls = append(w.calls, watched{id: w.next, ctx: ctx})
	if w.slow {
		w.armLocked(len(w.calls) - 1)
	}
	return w.next
}

// removeLocked forgets id and returns its AfterFunc's stop, if armed.
func (w *writeWatch) removeLocked(id uint64) func() bool {
	if id == 0 {
		return nil
	}
	for i := range w.calls {
		if w.calls[i].id == id {
			stop := w.calls[i].stop
			last := len(w.calls) - 1
			w.calls[i] = w.calls[last]
			w.calls[last] = watched{}
			w.calls = w.calls[:last]
			return stop
		}
	}
	return nil
}

// startProbeLocked starts the probe's ticks unless they are running.
func (w *writeWatch) startProbeLocked() {
	if w.probing {
		return
	}
	w.probing = true
	w.seen = w.writes
	if w.probe == nil {
		w.probe = time.AfterFunc(probeAfter, w.probed)
		return
	}
	w.probe.Reset(probeAfter)
}

// probed is the probe's tick. With no write under way (or nothing to
// watch) the ticks stop; a write under way since the last tick is slow,
// and every watched context is armed from now on.
func (w *writeWatch) probed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.writing || len(w.calls) == 0 || w.cut != nil {
		w.probing = false
		return
	}
	if w.writes == w.seen && !w.slow {
		w.slow = true
		for i := range w.calls {
			w.armLocked(i)
		}
	}
	w.seen = w.writes
	w.probe.Reset(probeAfter)
}

func (w *writeWatch) armLocked(i int) {
	e := &w.calls[i]
	if e.stop != nil {
		return
	}
	id, ctx := e.id, e.ctx
	e.stop = context.AfterFunc(ctx, func() { w.fire(id, ctx) })
}

// fire cuts the writes: ctx, still watched, ended during a blocked write.
func (w *writeWatch) fire(id uint64, ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut != nil {
		return
	}
	for _, e := range w.calls {
		if e.id == id {
			w.cut = fmt.Errorf("rabbitmq: a write the broker was not reading was abandoned when its caller's context ended (%w); part of a frame may be on the wire, so the connection was closed", context.Cause(ctx))
			_ = w.conn.SetWriteDeadline(aLongTimeAgo)
			return
		}
	}
}
