package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acemq-go/acemq/transport"
)

// ownPublisher is one publishing channel of an ownConn. Publish is safe for
// concurrent use: wmu covers only sequence assignment, waiter registration
// and the frame write. The connection's reader answers the waiters, in the
// order the broker spoke, and ends the channel at the broker's
// channel.close, at the close-ok to ours, or with the connection,
// answering everything still pending Lost.
type ownPublisher struct {
	c       *ownConn
	id      uint16
	confirm bool
	done    chan struct{}
	replies chan struct{} // open-ok and select-ok, reader → publisher()

	// wmu serialises writes (a publish waiting for it gives up when its
	// context ends); stopped is set once no further frame may be written
	// on the channel (it is closing or closed, or a write failed).
	wmu     writeLock
	stopped bool
	seq     uint64 // the last delivery tag written
	scratch []byte // the encoding buffer

	// pmu guards table, err and ended.
	pmu   sync.Mutex
	table pending
	err   error
	ended bool

	issued atomic.Uint64 // the last delivery tag registered
	// Reader-only state.
	low uint64    // no tag below it is unanswered
	ret *returned // a basic.return waiting for its content header
}

func newOwnPublisher(c *ownConn, id uint16, confirm bool) *ownPublisher {
	p := &ownPublisher{c: c, id: id, confirm: confirm, done: make(chan struct{}), replies: make(chan struct{}, 2), low: 1, wmu: newWriteLock()}
	if confirm {
		p.table = newPending()
	}
	return p
}

// method handles one method frame on the channel (reader goroutine).
func (p *ownPublisher) method(payload []byte) error {
	class, method, rest, ok := methodID(payload)
	if !ok {
		return fmt.Errorf("rabbitmq: the broker sent a method frame of %d bytes on channel %d, too short for its class and method", len(payload), p.id)
	}
	switch {
	case class == classBasic && (method == methodBasicAck || method == methodBasicNack):
		if tag, multiple, ok := readAck(rest); ok {
			p.onAck(tag, multiple, method == methodBasicAck)
		}
	case class == classBasic && method == methodBasicReturn:
		if r, ok := readReturn(rest); ok {
			p.ret = r
		}
	case class == classChannel && method == methodChannelClose:
		// Answered on the connection's control goroutine: the close-ok
		// waits for the channel's writes, and the reader waits for no
		// writer (a write the broker is not reading would stall every
		// ack behind it).
		ca, _ := readClose(rest)
		cause := &transport.Error{Code: int(ca.code), Reason: ca.text, Server: true}
		p.c.control(func() { p.closedByBroker(cause) })
	case class == classChannel && method == methodCloseOk:
		p.c.release(p)
		p.finish(transport.ErrClosed)
	case class == classChannel && method == methodChannelFlow:
		a := args{p: rest}
		active := a.octet()&1 != 0
		p.c.control(func() {
			_ = p.wmu.lock(context.Background())
			if !p.stopped {
				_ = p.c.w.urgent(context.Background(), appendFlowOk(nil, p.id, active), nil)
			}
			p.wmu.unlock()
		})
	case class == classChannel && method == methodChannelOpenOk, class == classConfirm && method == methodSelectOk:
		select {
		case p.replies <- struct{}{}:
		default:
		}
	}
	return nil
}

// closedByBroker answers the broker's channel.close (on the control
// goroutine): no more writes, close-ok, the channel number freed, every
// pending publish answered Lost with the broker's reason.
func (p *ownPublisher) closedByBroker(cause *transport.Error) {
	_ = p.wmu.lock(context.Background())
	p.stopped = true
	_ = p.c.w.urgent(context.Background(), appendCloseOk(nil, p.id), nil)
	p.wmu.unlock()
	p.c.release(p)
	p.finish(cause)
}

// contentHeader completes a pending basic.return with the message id of
// its content header.
func (p *ownPublisher) contentHeader(payload []byte) {
	r := p.ret
	if r == nil {
		return
	}
	p.ret = nil
	r.key.id = messageID(payload)
	if p.confirm {
		p.pmu.Lock()
		if !p.ended {
			p.table.markReturned(r.key, r.code, r.text)
		}
		p.pmu.Unlock()
	}
}

// onAck answers the publishes a basic.ack or basic.nack concerns.
func (p *ownPublisher) onAck(tag uint64, multiple, ack bool) {
	if !p.confirm {
		return
	}
	if !multiple {
		p.answer(tag, ack)
		if tag == p.low {
			p.low++
		}
		return
	}
	top := min(tag, p.issued.Load())
	for s := p.low; s <= top; s++ {
		p.answer(s, ack)
	}
	if top >= p.low {
		p.low = top + 1
	}
}

func (p *ownPublisher) answer(tag uint64, ack bool) {
	p.pmu.Lock()
	var w waiter
	ok := false
	if !p.ended {
		w, ok = p.table.remove(tag)
	}
	p.pmu.Unlock()
	if !ok || w.done == nil {
		return
	}
	switch {
	case !ack:
		w.done(transport.Confirmation{Outcome: transport.Nacked})
	case w.returned:
		w.done(transport.Confirmation{Outcome: transport.Returned, ReplyCode: w.code, ReplyText: w.text})
	default:
		w.done(transport.Confirmation{Outcome: transport.Acked})
	}
}

// finish ends the channel: no more writes, Done closed, every pending
// publish answered Lost with cause. A broker's close (a *transport.Error)
// is kept as the channel's error. Only the first call counts.
func (p *ownPublisher) finish(cause error) {
	// Taking wmu waits out a write in progress, so its waiter is either
	// already registered (and answered below) or never will be. The
	// reader calls this only once the connection has ended or the
	// channel's close-ok came, when no write holds wmu for long: writes
	// fail at once on an ended connection, and none are made on a closed
	// channel.
	_ = p.wmu.lock(context.Background())
	p.stopped = true
	p.wmu.unlock()

	p.pmu.Lock()
	if p.ended {
		p.pmu.Unlock()
		return
	}
	p.ended = true
	if cause != transport.ErrClosed {
		p.err = cause
	}
	var lost map[uint64]waiter
	if p.confirm {
		lost = p.table.takeAll()
	}
	p.pmu.Unlock()
	close(p.done)
	for _, w := range lost {
		if w.done != nil {
			w.done(transport.Confirmation{Outcome: transport.Lost, Err: cause})
		}
	}
}

// cause is the broker's reason the channel ended, or nil.
func (p *ownPublisher) cause() error {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return p.err
}

// Publish writes msg; see publisher.Publish for what its errors and done
// promise, which are the same. Safe for concurrent use; never waits for the
// broker's answer, and its write is bounded by ctx (see transport.Publisher).
func (p *ownPublisher) Publish(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rabbitmq: publish not attempted: %w: %w", transport.ErrNotWritten, err)
	}
	if !p.confirm && done != nil {
		return fmt.Errorf("rabbitmq: a confirm callback was given to a non-confirming publisher: %w", transport.ErrNotWritten)
	}
	if err := p.wmu.lock(ctx); err != nil {
		return fmt.Errorf("rabbitmq: publish not attempted: another publish held the channel past the caller's context: %w: %w", transport.ErrNotWritten, err)
	}
	if p.stopped {
		p.wmu.unlock()
		return p.notWritten()
	}
	buf, err := appendPublish(p.scratch[:0], p.id, p.c.frameMax, msg)
	if err != nil {
		p.wmu.unlock()
		return fmt.Errorf("rabbitmq: cannot encode the message: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
	}
	if cap(buf) <= maxScratch {
		p.scratch = buf
	}
	seq := p.seq + 1
	if p.confirm {
		p.pmu.Lock()
		p.table.add(seq, waiter{done: done, key: returnKey{msg.MessageID, msg.Exchange, msg.RoutingKey}, mandatory: msg.Mandatory})
		p.pmu.Unlock()
		p.issued.Store(seq)
	}
	sent, err := p.c.w.put(ctx, buf)
	if err == nil {
		p.seq = seq
		p.wmu.unlock()
		return nil
	}
	if !sent {
		if p.confirm {
			p.pmu.Lock()
			p.table.remove(seq)
			p.pmu.Unlock()
			p.issued.Store(p.seq)
		}
		if isWaited(err) {
			// ctx ended before the socket was free (a write the broker
			// is not reading holds it): nothing went, the channel goes on.
			p.wmu.unlock()
			return fmt.Errorf("rabbitmq: publish not attempted: %w: %w", transport.ErrNotWritten, err)
		}
		p.stopped = true
		p.wmu.unlock()
		if p.cause() != nil || p.c.Err() != nil {
			return p.notWritten() // with the broker's (or the network's) reason
		}
		// The connection's write failed (or was abandoned) before a byte
		// of this publish went.
		return fmt.Errorf("rabbitmq: publish not written: %w: %w: %w", transport.ErrNotWritten, transport.ErrClosed, err)
	}
	// Part of the frames may be on the wire. The failed write has closed
	// the socket, so the connection and this channel end, and the waiter,
	// still registered, is answered Lost then.
	p.seq = seq
	p.stopped = true
	p.wmu.unlock()
	return fmt.Errorf("rabbitmq: publish failed during the write; the message may have been sent: %w", err)
}

func (p *ownPublisher) notWritten() error {
	cause := p.cause()
	if cause == nil {
		cause = p.c.Err()
	}
	if cause == nil {
		return fmt.Errorf("rabbitmq: publish on a closed channel: %w: %w", transport.ErrNotWritten, transport.ErrClosed)
	}
	return fmt.Errorf("rabbitmq: publish on a closed channel: %w: %w: %w", transport.ErrNotWritten, transport.ErrClosed, cause)
}

// Confirming reports whether the channel is in confirm mode.
func (p *ownPublisher) Confirming() bool { return p.confirm }

// Done is closed when the channel has ended, for any reason.
func (p *ownPublisher) Done() <-chan struct{} { return p.done }

// Close sends channel.close and waits until the broker's close-ok (or the
// connection's end) has ended the channel and every pending publish has
// been answered Lost. Closing an ended channel returns nil.
func (p *ownPublisher) Close() error {
	p.sendClose()
	<-p.done
	return nil
}

// sendClose sends channel.close unless the channel is already closing or
// ended; the reader ends the channel at the close-ok, or the connection's
// end does (a failed write closes the socket).
func (p *ownPublisher) sendClose() {
	_ = p.wmu.lock(context.Background())
	defer p.wmu.unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.c.w.urgent(context.Background(), appendClose(nil, p.id, replySuccess, "closed by the client"), nil)
}
