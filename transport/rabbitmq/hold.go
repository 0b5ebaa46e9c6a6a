package rabbitmq

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"time"
)

// A client that flushes once per publish (amqp091-go does, and so would
// the owned connection, own.go) costs one write system call per publish.
// heldConn sits under the connection's writes (under amqp091-go with
// frames=amqp091, under the owned connection's frames otherwise) and lets
// the engine gather the publishes of a run (a SendAll, concurrent
// Sends) into one system call: while some writer holds it (Hold), Write
// keeps the bytes in the process; the last writer to Release writes them
// all, on its own goroutine, before it goes on to wait for confirms. No
// goroutine of its own ever writes, so a frozen process cannot send late
// what a writer believed written: bytes are kept only while a writer is
// still inside its run, and the writer that leaves last writes them.
//
// Kept bytes are bounded by maxHeld and by maxHeldAge; a Write that would
// pass the first, or that finds the kept bytes older than the second,
// writes the kept bytes and its own at once. The age bound matters when
// holds overlap without a break (many goroutines publishing, or a holder
// descheduled mid-run): another writer's acks and publishes then leave
// within about maxHeldAge instead of waiting for the last holder. A
// holder may give a deadline, which is its own: kept bytes that would be written once the
// deadline of a writer still holding has passed are dropped and the socket
// closed instead (see errHeldTooLong); a holder with a deadline writes what
// is kept as it leaves, so no deadline outlives its holder.
//
// A failed write is kept: every later Write returns it, and the socket is
// closed, so the client's reader fails and the connection shuts down; the
// publishes whose bytes were kept had returned from Write, but their
// confirms can then only end Lost.
//
// Every socket write is bounded by its caller's context (watch.go): a
// writer waiting for the socket gives up when its context ends, having
// written nothing, and a write blocked because the broker stopped reading
// is abandoned when its writer's context ends, which closes the socket
// (part of a frame may be on the wire). Hold never waits for a write, and
// a close bounds the write in progress before it does anything else
// (closeBy, Close).
type heldConn struct {
	net.Conn

	// wl is held across socket writes, so bytes go out in order; a
	// writer waiting for it gives up when its context ends.
	wl writeLock

	mu      sync.Mutex // guards what follows; never held across a socket write
	holders int
	buf     []byte      // kept bytes, not yet written
	spare   []byte      // a written buffer, kept for the next
	dls     []time.Time // the deadlines of the holders still holding (zero ones left out)
	since   time.Time   // when the oldest kept byte was kept
	err     error       // the first write failure; every later Write returns it

	// watch bounds each socket write by its caller's context and by a
	// close (watch.go).
	watch writeWatch

	now func() time.Time // the clock (time.Now; tests replace it)
}

// protocolHeader opens every AMQP 0-9-1 connection, before any frame.
const protocolHeader = "AMQP\x00\x00\x09\x01"

// maxHeld bounds the bytes kept: past it a Write goes to the socket with
// everything kept before it.
const maxHeld = 64 << 10

// maxHeldAge bounds how long a byte is kept: a Write that finds the kept
// bytes older writes them and its own at once.
const maxHeldAge = time.Millisecond

// errHeldTooLong is the failure when kept bytes outlived a holder's
// deadline (the process was frozen while they were kept).
var errHeldTooLong = errors.New("rabbitmq: bytes kept for one write outlived their writer's deadline (was the process frozen?); they were not sent and the connection is closed")

func newHeldConn(c net.Conn) *heldConn {
	return &heldConn{Conn: c, wl: newWriteLock(), watch: writeWatch{conn: c}, now: time.Now}
}

// Hold makes Writes keep their bytes until the last holder releases.
// deadline, when not zero, applies while this holder holds: kept bytes
// that would be written at or after it are dropped instead. Hold never
// waits for a write in progress.
func (c *heldConn) Hold(deadline time.Time) {
	c.mu.Lock()
	c.holders++
	if !deadline.IsZero() {
		c.dls = append(c.dls, deadline)
	}
	c.mu.Unlock()
}

// Release ends one hold taken with deadline; the last one out writes what
// is kept, bounded by ctx. A holder with a deadline that leaves while
// others still hold writes what is kept too (its own bytes are among it),
// so its deadline goes with it and never judges bytes written after it
// left. When ctx ends before the socket is free (a write the broker is
// not reading holds it), Release returns ctx's error and what is kept goes
// out with the next write on the connection.
func (c *heldConn) Release(ctx context.Context, deadline time.Time) error {
	c.mu.Lock()
	if c.holders == 1 && len(c.buf) > 0 {
		// The last one out yields once, still holding, so goroutines made
		// runnable with it (one batch of confirms wakes many Sends) add
		// their publishes to this write. It waits for nothing: the
		// scheduler runs it again after the goroutines already runnable.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	write := len(c.buf) > 0 && (c.holders == 1 || !deadline.IsZero())
	late := write && !deadline.IsZero() && !c.now().Before(deadline)
	// From here on nothing more is kept for this holder: a write after
	// the last holder left goes through, taking what is kept with it.
	c.holders--
	if !deadline.IsZero() {
		for i, d := range c.dls {
			if d.Equal(deadline) {
				c.dls = append(c.dls[:i], c.dls[i+1:]...)
				break
			}
		}
	}
	err := c.err
	if late {
		// Judged by this holder's deadline too: its bytes are kept.
		c.failLocked(errHeldTooLong)
		err = c.err
	}
	c.mu.Unlock()
	if !write || late {
		return err
	}
	if err := c.wl.lock(ctx); err != nil {
		return &errWaited{err}
	}
	_, err = c.writeLocked(ctx, nil)
	c.unlockWrite(ctx)
	return err
}

// pastDeadlineLocked reports whether some holder still holding has a
// deadline that has passed. c.mu is held.
func (c *heldConn) pastDeadlineLocked() bool {
	if len(c.dls) == 0 {
		return false
	}
	now := c.now()
	for _, d := range c.dls {
		if !now.Before(d) {
			return true
		}
	}
	return false
}

// Write keeps p while the connection is held and the cap allows, and
// otherwise writes what is kept and p in one call (amqp091-go's writes:
// no context of their own; a publish call watched with watch.begin
// bounds them).
func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	if c.keepLocked(p) {
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	ctx := context.Background()
	_ = c.wl.lock(ctx)
	_, err := c.writeLocked(ctx, p)
	c.unlockWrite(ctx)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// keepLocked keeps p when the connection is held and the cap and age
// allow, and reports whether it did. c.mu is held.
func (c *heldConn) keepLocked(p []byte) bool {
	if c.holders > 0 && len(c.buf)+len(p) <= maxHeld {
		if len(c.buf) == 0 {
			c.since = c.now()
			c.buf = append(c.buf, p...)
			return true
		}
		if c.now().Sub(c.since) < maxHeldAge {
			c.buf = append(c.buf, p...)
			return true
		}
	}
	return false
}

// put writes whole frames of the publishing connection AceMQ owns under
// the same rules as Write (kept while held, else written with what is
// kept), bounded by ctx. sent reports whether any byte of p may have been
// written: false when the connection had already failed or been closed
// for writes, when ctx ended before the socket was free (err is an
// *errWaited; the connection goes on), or when the write failed before
// reaching p. When sent is true and err is not nil, the write failed and
// the socket is closed.
func (c *heldConn) put(ctx context.Context, p []byte) (sent bool, err error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return false, err
	}
	if c.keepLocked(p) {
		c.mu.Unlock()
		return true, nil
	}
	c.mu.Unlock()
	if err := c.wl.lock(ctx); err != nil {
		return false, &errWaited{err}
	}
	sent, err = c.writeLocked(ctx, p)
	c.unlockWrite(ctx)
	return sent, err
}

// tryPut is put for a frame that may be skipped (a heartbeat): when
// another write holds the socket (perhaps blocked on a socket the broker
// no longer reads), it does nothing rather than wait; that write is
// traffic the broker will see anyway.
func (c *heldConn) tryPut(ctx context.Context, p []byte) {
	c.mu.Lock()
	if c.err != nil || c.keepLocked(p) {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if !c.wl.tryLock() {
		return
	}
	_, _ = c.writeLocked(ctx, p)
	c.unlockWrite(ctx)
}

// urgent writes what is kept and p at once, held or not, bounded by ctx:
// for control frames a caller waits on the answer to. after, when not nil,
// closes the stream for writes once p is out (connection.close and
// close-ok are the last frames a client sends), so every later write is
// refused with it.
func (c *heldConn) urgent(ctx context.Context, p []byte, after error) error {
	if err := c.wl.lock(ctx); err != nil {
		return &errWaited{err}
	}
	defer c.unlockWrite(ctx)
	if _, err := c.writeLocked(ctx, p); err != nil {
		return err
	}
	c.closeForWrites(after)
	return nil
}

// tryUrgent is urgent for a frame that must not wait for the socket (the
// reader's close-ok to the broker's connection.close): when another write
// holds it, p is not written, and after still closes the stream for
// writes.
func (c *heldConn) tryUrgent(ctx context.Context, p []byte, after error) {
	if !c.wl.tryLock() {
		c.closeForWrites(after)
		return
	}
	defer c.unlockWrite(ctx)
	if _, err := c.writeLocked(ctx, p); err == nil {
		c.closeForWrites(after)
	}
}

// closeForWrites refuses every later write with after (nil: nothing).
func (c *heldConn) closeForWrites(after error) {
	if after == nil {
		return
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = after
	}
	c.buf = nil
	c.mu.Unlock()
}

// writeLocked writes the kept bytes followed by p, bounded by ctx, and
// reports whether any byte of p may have been written. c.wl is held (not
// c.mu). On failure it keeps the error and closes the socket.
func (c *heldConn) writeLocked(ctx context.Context, p []byte) (sent bool, err error) {
	if ended(ctx) {
		return false, &errWaited{ctx.Err()} // before taking what is kept
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return false, err
	}
	out, kept := p, 0
	if len(c.buf) > 0 {
		if c.pastDeadlineLocked() {
			c.failLocked(errHeldTooLong)
			err := c.err
			c.mu.Unlock()
			return false, err
		}
		kept = len(c.buf)
		out = append(c.buf, p...)
		c.buf, c.spare = c.spare[:0], nil
	}
	c.mu.Unlock()
	if len(out) == 0 {
		return false, nil
	}
	n, err := c.watch.write(ctx, c.Conn, out) // p is the client's: never kept
	if kept > 0 {
		c.mu.Lock()
		if c.spare == nil && cap(out) <= 2*maxHeld {
			c.spare = out[:0]
		}
		c.mu.Unlock()
	}
	sent = len(p) > 0 && n > kept
	if err != nil {
		if n == 0 && isWaited(err) {
			// ctx ended just before the write: nothing went and the stream
			// is whole; what was kept goes back, ahead of anything kept since.
			if kept > 0 {
				c.mu.Lock()
				if c.err == nil {
					c.buf = append(out[:kept:kept], c.buf...)
				}
				c.mu.Unlock()
			}
			return false, err
		}
		// Kept bytes taken out and not (all) written, or part of a frame
		// on the wire: the connection cannot go on.
		c.mu.Lock()
		c.failLocked(err)
		c.mu.Unlock()
		return sent, err
	}
	return len(p) > 0, nil
}

// unlockWrite releases c.wl. Bytes kept while nobody holds (a last holder
// that gave up waiting for the socket) are written first, within ctx.
func (c *heldConn) unlockWrite(ctx context.Context) {
	c.mu.Lock()
	left := c.holders == 0 && len(c.buf) > 0 && c.err == nil
	c.mu.Unlock()
	if left && !ended(ctx) {
		_, _ = c.writeLocked(ctx, nil)
	}
	c.wl.unlock()
}

// failLocked keeps err (the first failure), drops the kept bytes and
// closes the socket, so the client's reader fails and every pending
// confirm ends Lost. c.mu is held.
func (c *heldConn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	c.buf = nil
	_ = c.Conn.Close()
}

// closeBy bounds every socket write, the one in progress included, by t:
// a close sets it before anything else, so it never waits for a writer
// blocked on a socket the broker stopped reading.
func (c *heldConn) closeBy(t time.Time) { c.watch.closeBy(t) }

// Close closes the socket without waiting for a write in progress (it
// fails); bytes still kept are dropped (the client closes only once the
// broker answered its close, or after a failure).
func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.buf = nil
	c.mu.Unlock()
	return err
}
