package rabbitmq

import (
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
type heldConn struct {
	net.Conn

	mu      sync.Mutex // held across socket writes, so bytes go out in order
	holders int
	buf     []byte      // kept bytes, not yet written
	dls     []time.Time // the deadlines of the holders still holding (zero ones left out)
	since   time.Time   // when the oldest kept byte was kept
	err     error       // the first write failure; every later Write returns it

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
	return &heldConn{Conn: c, now: time.Now}
}

// Hold makes Writes keep their bytes until the last holder releases.
// deadline, when not zero, applies while this holder holds: kept bytes
// that would be written at or after it are dropped instead.
func (c *heldConn) Hold(deadline time.Time) {
	c.mu.Lock()
	c.holders++
	if !deadline.IsZero() {
		c.dls = append(c.dls, deadline)
	}
	c.mu.Unlock()
}

// Release ends one hold taken with deadline; the last one out writes what
// is kept. A holder with a deadline that leaves while others still hold
// writes what is kept too (its own bytes are among it), so its deadline
// goes with it and never judges bytes written after it left.
func (c *heldConn) Release(deadline time.Time) error {
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
	defer c.mu.Unlock()
	err := c.err
	if c.holders == 1 || (!deadline.IsZero() && len(c.buf) > 0) {
		err = c.flushLocked(nil) // judged by this holder's deadline too
	}
	c.holders--
	if !deadline.IsZero() {
		for i, d := range c.dls {
			if d.Equal(deadline) {
				c.dls = append(c.dls[:i], c.dls[i+1:]...)
				break
			}
		}
	}
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
// otherwise writes what is kept and p in one call.
func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.keepLocked(p) {
		return len(p), nil
	}
	if err := c.flushLocked(p); err != nil {
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
// the same rules as Write: kept while held, else written with what is
// kept. sent is false when nothing was written because the connection had
// already failed or been closed for writes; when sent is true and err is
// not nil, the write failed and the socket is closed.
func (c *heldConn) put(p []byte) (sent bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false, c.err
	}
	if c.keepLocked(p) {
		return true, nil
	}
	return true, c.flushLocked(p)
}

// tryPut is put for a frame that may be skipped (a heartbeat): when
// another write holds the connection (perhaps blocked on a socket the
// broker no longer reads), it does nothing rather than wait; that write is
// traffic the broker will see anyway.
func (c *heldConn) tryPut(p []byte) {
	if !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	if c.err != nil || c.keepLocked(p) {
		return
	}
	_ = c.flushLocked(p)
}

// urgent writes what is kept and p at once, held or not: for control frames
// a caller waits on the answer to. after, when not nil, closes the stream
// for writes once p is out (connection.close and close-ok are the last
// frames a client sends), so every later write is refused with it.
func (c *heldConn) urgent(p []byte, after error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(p); err != nil {
		return err
	}
	if after != nil {
		c.err = after
		c.buf = nil
	}
	return nil
}

// flushLocked writes the kept bytes followed by p. On failure it keeps the
// error and closes the socket. c.mu is held.
func (c *heldConn) flushLocked(p []byte) error {
	if c.err != nil {
		return c.err
	}
	if len(c.buf) == 0 {
		if len(p) == 0 {
			return nil
		}
		if _, err := c.Conn.Write(p); err != nil { // p is the client's: never kept
			c.fail(err)
			return err
		}
		return nil
	}
	if c.pastDeadlineLocked() {
		c.fail(errHeldTooLong)
		return c.err
	}
	out := append(c.buf, p...)
	_, err := c.Conn.Write(out)
	if cap(out) <= 2*maxHeld {
		c.buf = out[:0]
	} else {
		c.buf = nil
	}
	if err != nil {
		c.fail(err)
		return err
	}
	return nil
}

// fail keeps err, drops the kept bytes and closes the socket, so the
// client's reader fails and every pending confirm ends Lost.
func (c *heldConn) fail(err error) {
	c.err = err
	c.buf = nil
	_ = c.Conn.Close()
}

// Close closes the socket; bytes still kept are dropped (the client closes
// only once the broker answered its close, or after a failure).
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
