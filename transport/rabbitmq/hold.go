package rabbitmq

import (
	"encoding/binary"
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
// within about maxHeldAge instead of waiting for the last holder. A holder may give a
// deadline, which is its own: kept bytes that would be written once the
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

	// Outbound frame tracking, for the native publish path (native.go):
	// amqp091-go's frames may reach Write split anywhere, so the frame
	// headers are followed as the bytes pass and frames of our own are
	// appended only between two of its frames.
	hn      int      // bytes of the current frame's prefix seen (0 at a boundary)
	hb      [11]byte // the prefix: frame header and, for a method, class and method
	left    int      // bytes of the current frame after its prefix still to pass
	waiting int      // appenders waiting for a boundary
	cond    *sync.Cond
	natives *natives // the native channels, to close for writes; nil when none
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
	// The stream opens with the 8-byte protocol header ("AMQP" 0 0 9 1),
	// not a frame: the tracker passes over it first.
	h := &heldConn{Conn: c, now: time.Now, left: len(protocolHeader)}
	h.cond = sync.NewCond(&h.mu)
	return h
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
	c.track(p)
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

// track follows the frames in p, bytes amqp091-go has just written: it
// notes where each frame ends, marks a native channel closed for writes
// when amqp091-go writes its channel.close or channel.close-ok (every
// native channel at connection.close or close-ok), and wakes
// appenders once the stream is between two frames. c.mu is held.
func (c *heldConn) track(p []byte) {
	for len(p) > 0 {
		if c.left > 0 {
			n := min(c.left, len(p))
			c.left -= n
			p = p[n:]
			continue
		}
		want := 7
		if c.hn >= 7 && c.hb[0] == frameMethod && binary.BigEndian.Uint32(c.hb[3:7]) >= 4 {
			want = 11
		}
		n := copy(c.hb[c.hn:want], p)
		c.hn += n
		p = p[n:]
		if c.hn < want {
			continue
		}
		if want == 7 && c.hb[0] == frameMethod && binary.BigEndian.Uint32(c.hb[3:7]) >= 4 {
			continue // read the class and method next
		}
		size := int(binary.BigEndian.Uint32(c.hb[3:7]))
		if want == 11 && c.natives != nil {
			class, method := binary.BigEndian.Uint16(c.hb[7:9]), binary.BigEndian.Uint16(c.hb[9:11])
			switch {
			case class == classChannel && (method == methodChannelClose || method == methodCloseOk):
				c.natives.closeWrites(binary.BigEndian.Uint16(c.hb[1:3]))
			case class == classConnection && (method == methodConnectionClose || method == methodConnectionCloseOk):
				c.natives.closeAllWrites()
			}
		}
		c.left = size + 1 - (want - 7)
		c.hn = 0
	}
	if c.hn == 0 && c.left == 0 && c.waiting > 0 {
		c.cond.Broadcast()
	}
}

// errClosedForWrites refuses an append on a channel amqp091-go has closed
// (or answered the broker's close of): a frame after that point would be
// a connection error at the broker.
var errClosedForWrites = errors.New("rabbitmq: the channel has been closed; nothing was written")

// appendFrames writes frames, whole frames of our own on channel nc, into
// the stream at the next point between two of amqp091-go's frames, under
// the same rules as Write. It waits (without spinning) while amqp091-go is
// inside a frame. sent is false when nothing was written: the connection
// had failed or nc was closed for writes first; when sent is true and err
// is not nil, the write failed and the connection is closed.
func (c *heldConn) appendFrames(nc *nativeChan, frames []byte) (sent bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !nc.closedW && (c.hn != 0 || c.left != 0) {
		c.waiting++
		c.cond.Wait()
		c.waiting--
	}
	if c.err != nil {
		return false, c.err
	}
	if nc.closedW {
		return false, errClosedForWrites
	}
	if c.keepLocked(frames) {
		return true, nil
	}
	return true, c.flushLocked(frames)
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
	c.cond.Broadcast()
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
	c.cond.Broadcast()
	c.mu.Unlock()
	return err
}
