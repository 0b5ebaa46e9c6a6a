package rabbitmq

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"time"
)

// amqp091-go flushes its buffered writer once per publish, so every
// publish costs one write system call. heldConn sits under the client and
// lets the engine gather the publishes of a run (a SendAll, concurrent
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
// within about maxHeldAge instead of waiting for the last holder. A holder may give a deadline: kept
// bytes that find the earliest such deadline passed when they would be
// written are dropped and the socket closed instead (see errHeldTooLong).
//
// A failed write is kept: every later Write returns it, and the socket is
// closed, so the client's reader fails and the connection shuts down; the
// publishes whose bytes were kept had returned from Write, but their
// confirms can then only end Lost.
type heldConn struct {
	net.Conn

	mu      sync.Mutex // held across socket writes, so bytes go out in order
	holders int
	buf     []byte    // kept bytes, not yet written
	dl      time.Time // earliest holder deadline since the connection was last idle
	since   time.Time // when the oldest kept byte was kept
	err     error     // the first write failure; every later Write returns it

	now func() time.Time // the clock (time.Now; tests replace it)
}

// maxHeld bounds the bytes kept: past it a Write goes to the socket with
// everything kept before it.
const maxHeld = 64 << 10

// maxHeldAge bounds how long a byte is kept: a Write that finds the kept
// bytes older writes them and its own at once.
const maxHeldAge = time.Millisecond

// errHeldTooLong is the failure when kept bytes outlived a holder's
// deadline (the process was frozen while they were kept).
var errHeldTooLong = errors.New("rabbitmq: bytes kept for one write outlived their writer's deadline (was the process frozen?); they were not sent and the connection is closed")

func newHeldConn(c net.Conn) *heldConn { return &heldConn{Conn: c, now: time.Now} }

// Hold makes Writes keep their bytes until the last holder releases.
func (c *heldConn) Hold(deadline time.Time) {
	c.mu.Lock()
	c.holders++
	if !deadline.IsZero() && (c.dl.IsZero() || deadline.Before(c.dl)) {
		c.dl = deadline
	}
	c.mu.Unlock()
}

// Release ends one hold; the last one out writes what is kept.
func (c *heldConn) Release() error {
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
	c.holders--
	if c.holders > 0 {
		return c.err
	}
	err := c.flushLocked(nil)
	c.dl = time.Time{}
	return err
}

// Write keeps p while the connection is held and the cap allows, and
// otherwise writes what is kept and p in one call.
func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.holders > 0 && len(c.buf)+len(p) <= maxHeld {
		if len(c.buf) == 0 {
			c.since = c.now()
			c.buf = append(c.buf, p...)
			return len(p), nil
		}
		if c.now().Sub(c.since) < maxHeldAge {
			c.buf = append(c.buf, p...)
			return len(p), nil
		}
	}
	if err := c.flushLocked(p); err != nil {
		return 0, err
	}
	return len(p), nil
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
	if !c.dl.IsZero() && !c.now().Before(c.dl) {
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
