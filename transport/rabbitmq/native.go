package rabbitmq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// The native publish path. amqp091-go still opens and closes the channel
// and reads everything the broker sends, but a publisher's frames are
// written by AceMQ (frames.go) into the write stream between two of
// amqp091-go's frames (heldConn.appendFrames), and its confirms are read by
// AceMQ: the channel is put in confirm mode by a confirm.select of ours,
// whose confirm.select-ok the frame guard replaces with a heartbeat, and
// the guard hands the channel's basic.ack, basic.nack and basic.return to
// the publisher's dispatcher in the order they arrive. amqp091-go, not in
// confirm mode and with no return listener, ignores them.
//
// Why: amqp091-go's PublishWithDeferredConfirm was a quarter of AceMQ's
// CPU per message (a bytes.Buffer per frame, a slice per short string, a
// table validation), about 60 allocations per publish; the frames written
// here cost none in steady state.

// maxTappedFrame bounds the method frames read whole on a native channel
// (acks are 21 bytes, a basic.return a few hundred).
const maxTappedFrame = 64 << 10

// maxScratch bounds the encoding buffer a publisher keeps between
// publishes; a larger publish's buffer is dropped after use.
const maxScratch = 1 << 20

// heartbeatFrame replaces the swallowed confirm.select-ok: amqp091-go
// ignores it (it only counts as traffic).
var heartbeatFrame = [8]byte{frameHeartbeat, 0, 0, 0, 0, 0, 0, frameEndOctet}

// natives registers the channels the native path owns on one connection.
// The writer side (heldConn) closes a channel for writes when amqp091-go
// writes its channel.close or close-ok; the reader side (guardedConn) taps
// a channel until the broker's channel.close or close-ok arrives.
type natives struct {
	mu      sync.Mutex
	write   map[uint16]*nativeChan
	read    map[uint16]*nativeChan
	reading atomic.Int32 // len(read), so the reader skips the look-up when none
}

func newNatives() *natives {
	return &natives{write: make(map[uint16]*nativeChan), read: make(map[uint16]*nativeChan)}
}

func (n *natives) register(nc *nativeChan) {
	n.mu.Lock()
	n.write[nc.id] = nc
	n.read[nc.id] = nc
	n.reading.Store(int32(len(n.read)))
	n.mu.Unlock()
}

// closeWrites marks channel id closed for appends. The heldConn's mu is
// held, which guards closedW.
func (n *natives) closeWrites(id uint16) {
	n.mu.Lock()
	if nc := n.write[id]; nc != nil {
		nc.closedW = true
		delete(n.write, id)
	}
	n.mu.Unlock()
}

// closeAllWrites marks every native channel closed for appends
// (amqp091-go has written connection.close or close-ok). The heldConn's mu
// is held.
func (n *natives) closeAllWrites() {
	n.mu.Lock()
	for id, nc := range n.write {
		nc.closedW = true
		delete(n.write, id)
	}
	n.mu.Unlock()
}

// reader returns the channel to tap for id, or nil.
func (n *natives) reader(id uint16) *nativeChan {
	n.mu.Lock()
	nc := n.read[id]
	n.mu.Unlock()
	return nc
}

// dropReader stops tapping channel id (the broker has closed it).
func (n *natives) dropReader(id uint16) {
	n.mu.Lock()
	delete(n.read, id)
	n.reading.Store(int32(len(n.read)))
	n.mu.Unlock()
}

// unregister removes nc wherever it is still registered.
func (n *natives) unregister(nc *nativeChan) {
	n.mu.Lock()
	if n.write[nc.id] == nc {
		delete(n.write, nc.id)
	}
	if n.read[nc.id] == nc {
		delete(n.read, nc.id)
	}
	n.reading.Store(int32(len(n.read)))
	n.mu.Unlock()
}

type tapKind uint8

const (
	tapAck tapKind = iota + 1
	tapNack
	tapReturn
)

// tapEvent is one broker answer on a native channel (24 bytes, so the
// dispatcher's buffer stays small; a return's details are behind ret).
type tapEvent struct {
	kind     tapKind
	multiple bool
	tag      uint64
	ret      *returned
}

// returned is what a basic.return says.
type returned struct {
	code uint16
	text string
	key  returnKey
}

// nativeChan is one channel of the native path, shared by its publisher,
// the heldConn and the guardedConn.
type nativeChan struct {
	id      uint16
	closedW bool // guarded by the heldConn's mu

	events   chan tapEvent // reader → dispatcher, in arrival order
	gone     chan struct{} // closed when the dispatcher has ended
	selected chan struct{} // closed by the reader at confirm.select-ok

	// Reader-only state.
	selectSeen bool
	ret        *returned // a basic.return waiting for its content header
}

func newNativeChan(id uint16) *nativeChan {
	return &nativeChan{id: id, events: make(chan tapEvent, confirmBuffer), gone: make(chan struct{}), selected: make(chan struct{})}
}

// push hands ev to the dispatcher, waiting while its buffer is full,
// unless the dispatcher has ended.
func (nc *nativeChan) push(ev tapEvent) {
	select {
	case nc.events <- ev:
	case <-nc.gone:
	}
}

// tap reads one method frame of a native channel and returns the bytes to
// hand to amqp091-go: the frame itself, or a heartbeat in place of the
// confirm.select-ok.
func (g *guardedConn) tap(nc *nativeChan, frame []byte) []byte {
	p := frame[7 : len(frame)-1]
	if len(p) < 4 {
		return frame
	}
	class, method := binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4])
	switch {
	case class == classBasic && (method == methodBasicAck || method == methodBasicNack) && len(p) >= 13:
		kind := tapAck
		if method == methodBasicNack {
			kind = tapNack
		}
		nc.push(tapEvent{kind: kind, tag: binary.BigEndian.Uint64(p[4:12]), multiple: p[12]&1 != 0})
	case class == classBasic && method == methodBasicReturn:
		if r, ok := parseReturn(p[4:]); ok {
			nc.ret = r
		}
	case class == classConfirm && method == methodSelectOk && !nc.selectSeen:
		nc.selectSeen = true
		close(nc.selected)
		return heartbeatFrame[:]
	case class == classChannel && (method == methodChannelClose || method == methodCloseOk):
		g.natives.dropReader(nc.id)
	}
	return frame
}

// parseReturn reads basic.return's arguments: reply code, reply text,
// exchange, routing key.
func parseReturn(p []byte) (*returned, bool) {
	if len(p) < 2 {
		return nil, false
	}
	r := &returned{code: binary.BigEndian.Uint16(p)}
	p = p[2:]
	var strs [3]string
	for i := range strs {
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return nil, false
		}
		strs[i] = string(p[1 : 1+int(p[0])])
		p = p[1+int(p[0]):]
	}
	r.text, r.key.exchange, r.key.routingKey = strs[0], strs[1], strs[2]
	return r, true
}

// returned completes the pending basic.return of nc with the message id
// of its content header frame and hands it to the dispatcher.
func (g *guardedConn) returned(nc *nativeChan, frame []byte) {
	r := nc.ret
	nc.ret = nil
	if len(frame) >= 8 {
		r.key.id = messageID(frame[7 : len(frame)-1])
	}
	nc.push(tapEvent{kind: tapReturn, ret: r})
}

// messageID reads the message-id property of a content header payload
// ("" when absent or unreadable).
func messageID(p []byte) string {
	if len(p) < 14 {
		return ""
	}
	flags := binary.BigEndian.Uint16(p[12:14])
	if flags&propMessageID == 0 || flags&propContinued != 0 {
		return ""
	}
	off := 14
	shortstr := func() bool {
		if off >= len(p) {
			return false
		}
		off += 1 + int(p[off])
		return off <= len(p)
	}
	for _, f := range [...]struct {
		bit  uint16
		size int // -1 shortstr, -2 table
	}{{propContentType, -1}, {propEncoding, -1}, {propHeaders, -2}, {propDeliveryMode, 1}, {propPriority, 1}, {propCorrelationID, -1}, {propReplyTo, -1}, {propExpiration, -1}} {
		if flags&f.bit == 0 {
			continue
		}
		switch f.size {
		case -1:
			if !shortstr() {
				return ""
			}
		case -2:
			if off+4 > len(p) {
				return ""
			}
			off += 4 + int(binary.BigEndian.Uint32(p[off:off+4]))
		default:
			off += f.size
		}
		if off > len(p) || off < 0 {
			return ""
		}
	}
	if off >= len(p) || off+1+int(p[off]) > len(p) {
		return ""
	}
	return string(p[off+1 : off+1+int(p[off])])
}

// nativeState is a publisher's native-path state.
type nativeState struct {
	held     *heldConn
	natives  *natives
	nc       *nativeChan
	frameMax int

	seq     uint64 // the last delivery tag written; under the publisher's wmu
	scratch []byte // the encoding buffer; under wmu

	issued atomic.Uint64 // the last delivery tag registered, for the dispatcher
	low    uint64        // dispatcher only: no tag below it is unanswered
}

// channelID reads the channel number amqp091-go gave ch. amqp091-go does
// not export it; its unexported id field is read (never written) through
// reflection, and a test holds the pinned version to it.
func channelID(ch *amqp.Channel) (uint16, error) {
	f := reflect.ValueOf(ch).Elem().FieldByName("id")
	if !f.IsValid() || f.Kind() != reflect.Uint16 {
		return 0, errors.New("rabbitmq: cannot read the channel number from amqp091-go's Channel (its layout changed); add frames=amqp091 to the broker URL to publish through amqp091-go")
	}
	return uint16(f.Uint()), nil
}

// newNativePublisher makes ch a native publisher and, when confirm is set,
// puts it in confirm mode, waiting for the broker's select-ok, ctx, or the
// channel's end. On failure ch is closed.
func newNativePublisher(ctx context.Context, ch *amqp.Channel, confirm bool, held *heldConn, nat *natives, frameMax int) (*publisher, error) {
	id, err := channelID(ch)
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	nc := newNativeChan(id)
	nat.register(nc)
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	p := &publisher{ch: ch, confirm: confirm, done: make(chan struct{}),
		nat: &nativeState{held: held, natives: nat, nc: nc, frameMax: frameMax, low: 1}}
	fail := func(err error) (*publisher, error) {
		close(nc.gone)
		// Closed before the channel leaves the tap: a select-ok still on
		// its way is swallowed, not handed to amqp091-go, and Close
		// returns once the close-ok that follows it has been read.
		_ = ch.Close()
		nat.unregister(nc)
		return nil, err
	}
	if confirm {
		p.table = newPending()
		sel := appendMethodFrame(nil, id, classConfirm, methodConfirmSelect, 0)
		if _, err := held.appendFrames(nc, sel); err != nil {
			// The channel or the connection was closed first.
			return fail(fmt.Errorf("rabbitmq: cannot put the channel in confirm mode: %w: %w", transport.ErrClosed, err))
		}
		select {
		case <-nc.selected:
		case e := <-closes:
			if e != nil {
				return fail(fromAMQPError(e))
			}
			return fail(transport.ErrClosed)
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	go p.dispatchNative(closes)
	return p, nil
}

// dispatchNative answers waiters in the order the broker spoke. When the
// channel ends it first answers every event the reader queued (they were
// read before the close), then everything still pending Lost.
func (p *publisher) dispatchNative(closes chan *amqp.Error) {
	nc := p.nat.nc
	for {
		select {
		case ev := <-nc.events:
			p.onEvent(ev)
		case e := <-closes:
			for drained := false; !drained; {
				select {
				case ev := <-nc.events:
					p.onEvent(ev)
				default:
					drained = true
				}
			}
			p.nat.natives.unregister(nc)
			close(nc.gone)
			p.finish(e)
			return
		}
	}
}

func (p *publisher) onEvent(ev tapEvent) {
	if !p.confirm {
		return
	}
	n := p.nat
	switch ev.kind {
	case tapReturn:
		p.pmu.Lock()
		p.table.markReturned(ev.ret.key, ev.ret.code, ev.ret.text)
		p.pmu.Unlock()
	case tapAck, tapNack:
		ack := ev.kind == tapAck
		if !ev.multiple {
			p.onConfirm(amqp.Confirmation{DeliveryTag: ev.tag, Ack: ack})
			if ev.tag == n.low {
				n.low++
			}
			return
		}
		top := min(ev.tag, n.issued.Load())
		for s := n.low; s <= top; s++ {
			p.onConfirm(amqp.Confirmation{DeliveryTag: s, Ack: ack})
		}
		if top >= n.low {
			n.low = top + 1
		}
	}
}

// publishNative is Publish on the native path.
func (p *publisher) publishNative(msg *transport.Message, done transport.ConfirmFunc) error {
	n := p.nat
	p.wmu.Lock()
	if p.stopped {
		p.wmu.Unlock()
		return p.notWritten()
	}
	buf, err := appendPublish(n.scratch[:0], n.nc.id, n.frameMax, msg)
	if err != nil {
		p.wmu.Unlock()
		return fmt.Errorf("rabbitmq: cannot encode the message: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
	}
	if cap(buf) <= maxScratch {
		n.scratch = buf
	}
	seq := n.seq + 1
	if p.confirm {
		p.pmu.Lock()
		p.table.add(seq, waiter{done: done, key: returnKey{msg.MessageID, msg.Exchange, msg.RoutingKey}, mandatory: msg.Mandatory})
		p.pmu.Unlock()
		n.issued.Store(seq)
	}
	sent, err := n.held.appendFrames(n.nc, buf)
	if err == nil {
		n.seq = seq
		p.wmu.Unlock()
		return nil
	}
	if !sent {
		if p.confirm {
			n.issued.Store(n.seq)
		}
		return p.unwrittenLocked(seq)
	}
	// Part of the frames may be on the wire. The write failure has closed
	// the socket, so the connection and this channel end, and the waiter,
	// still registered, is answered Lost then.
	n.seq = seq
	p.stopped = true
	p.wmu.Unlock()
	return fmt.Errorf("rabbitmq: publish failed during the write; the message may have been sent: %w", convertError(err))
}
