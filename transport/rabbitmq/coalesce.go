package rabbitmq

import (
	"net"
	"sync"
)

// NOT WIRED IN: dial does not use coalescingConn. It was adopted for its
// CPU saving (about a fifth per published message, a quarter per consumed
// one) and taken out the same day: bytes it has accepted wait in this
// process until the flusher runs, so a process frozen (SIGSTOP, a paused
// VM) while the flusher lags sends them only when it wakes, after the
// checks its caller made before writing (an outbox relay's lease) have
// expired. Written directly, they sit in the kernel, which sends them
// while the process is frozen. outbox's TestCrashedRelaysLoseNothingAndAreTakenOver
// saw two last copies out of order from one SIGSTOP with it under load.
// Using it needs a bound on how far the flusher may lag, or an opt-in.
//
// amqp091-go flushes its buffered writer once per publish, so every
// publish costs one write system call. coalescingConn sits under the
// client and gathers what the client writes while an earlier write is
// still in the kernel: Write copies the bytes into a buffer and returns,
// and a flusher goroutine (running only while there is something to write)
// hands the buffer to the socket in one call. At one publish at a time
// nothing waits: the flusher starts at once and writes those bytes; under
// a pipeline of publishes, each system call carries what arrived during
// the one before.
//
// A write error is kept: every later Write returns it, and the socket is
// closed, so the client's reader fails and the connection shuts down at
// once. The publishes whose bytes were buffered when the error struck had
// returned from Write, but their confirms can then only end Lost: none of
// them is reported as confirmed.
type coalescingConn struct {
	net.Conn

	mu       sync.Mutex
	room     sync.Cond // signalled when the flusher takes the buffer, fails or returns
	buf      []byte    // bytes written by the client, not yet handed to the socket
	spare    []byte    // the flusher's previous buffer, reused
	flushing bool      // a flusher goroutine is running
	err      error     // the first write error (net.ErrClosed after Close); every later Write returns it
}

// maxPending bounds the bytes Write buffers: past it the client's write
// waits for the socket, as a direct write would.
const maxPending = 256 << 10

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c}
	cc.room.L = &cc.mu
	return cc
}

// Write queues p for the socket. It returns the first write error once
// one has happened, and waits while maxPending bytes are queued.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for c.err == nil && len(c.buf) >= maxPending {
		c.room.Wait()
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.buf = append(c.buf, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	c.mu.Unlock()
	return len(p), nil
}

// flush writes the buffer to the socket until it is empty or a write
// fails, then returns.
func (c *coalescingConn) flush() {
	c.mu.Lock()
	for len(c.buf) > 0 && c.err == nil {
		out := c.buf
		c.buf = c.spare[:0]
		c.room.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if cap(out) <= maxPending*2 {
			c.spare = out[:0]
		}
		if err != nil {
			c.err = err
			c.buf = nil
			c.room.Broadcast()
			// The reader then fails too, and the client shuts the
			// connection down: pending confirms end Lost.
			_ = c.Conn.Close()
		}
	}
	c.flushing = false
	c.room.Broadcast()
	c.mu.Unlock()
}

// Close closes the socket (which ends a write in progress) and waits for
// the flusher to return. Bytes still queued are dropped: the client only
// closes once the broker answered its close, or after a failure.
func (c *coalescingConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.buf = nil
	c.room.Broadcast()
	for c.flushing {
		c.room.Wait()
	}
	c.mu.Unlock()
	return err
}
