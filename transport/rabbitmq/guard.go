package rabbitmq

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"github.com/acemq-go/acemq/internal/wire"
)

// The Go client (amqp091-go) refuses to read a content header whose
// headers table nests deeper than 32 levels or holds more than 8,192
// entries in one table or array, and closes the whole connection with a
// frame error when a delivery carries one; RabbitMQ accepts such messages
// from other clients and redelivers them to the head of the queue, so one
// such message used to kill the consuming connection about once a second
// for ever.
//
// guardedConn sits between the socket and the client and reads frames
// ahead of it. Method, body and heartbeat frames pass through untouched
// (streamed, not copied). A content header frame is held whole and its
// headers table scanned without allocating; when some header is over a
// limit (or cannot be read at all), the frame is rewritten before the
// client sees it: readable headers stay as they are, the unreadable ones
// move, as their original AMQP bytes, into one byte-array header
// (wire.KeptHeader), and wire.UnreadableHeader says which header went over
// which limit. The client then reads an ordinary delivery, the connection
// stays up, and the engine sets the message aside with that reason.
type guardedConn struct {
	net.Conn
	r    *bufio.Reader
	hdr  [7]byte
	out  []byte // bytes ready for the client
	pass int    // bytes of the current frame still to stream through
	buf  []byte // the held content header frame, reused
	err  error  // a read error held back until the bytes before it are read
	// maxFrame is the negotiated frame_max once the connection is open (0
	// before): a rewritten frame must not exceed it.
	maxFrame atomic.Uint32
	// rewritten counts frames rewritten, for tests.
	rewritten atomic.Int64
	// noHeartbeat zeroes the heartbeat the broker proposes in
	// connection.tune, so the client answers 0 and heartbeats are off
	// (amqp091-go otherwise takes the broker's interval when asked for
	// none). Set before the client reads.
	noHeartbeat bool
	tuned       bool // connection.tune has gone by
}

// maxHeldFrame bounds the content header frames held for scanning; a
// larger one passes through for the client to refuse as too large.
const maxHeldFrame = 4 << 20

const (
	frameHeaderType = 2
	frameEndOctet   = 0xCE
	propHeaders     = 0x2000
	propContentType = 0x8000
	propEncoding    = 0x4000
	propContinued   = 0x0001
)

func newGuardedConn(c net.Conn) *guardedConn {
	return &guardedConn{Conn: c, r: bufio.NewReaderSize(c, 32<<10)}
}

// Read hands the client the next bytes, holding and checking each content
// header frame before it is handed over. Once it has bytes to return it
// goes on only through frames already buffered, so it never waits while
// holding bytes the client could use, and hands over many small frames
// (acks, deliveries) in one call.
func (g *guardedConn) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.out) == 0 && g.pass == 0 {
			if n > 0 && !g.nextBuffered() {
				break
			}
			if err := g.next(); err != nil {
				if n > 0 {
					g.err = err
					break
				}
				return 0, err
			}
		}
		if len(g.out) > 0 {
			m := copy(p[n:], g.out)
			g.out = g.out[m:]
			n += m
			continue
		}
		q := p[n:]
		if len(q) > g.pass {
			q = q[:g.pass]
		}
		if n > 0 {
			b := g.r.Buffered()
			if b == 0 {
				break
			}
			q = q[:min(len(q), b)]
		}
		m, err := g.r.Read(q)
		g.pass -= m
		n += m
		if err != nil {
			if n > 0 {
				g.err = err
				break
			}
			return 0, err
		}
	}
	return n, nil
}

// nextBuffered reports whether the next frame's header, and the whole
// frame when it is a content header, can be read without waiting; it
// returns any error a previous Read held back as true, so next reports it.
func (g *guardedConn) nextBuffered() bool {
	if g.err != nil || g.r.Buffered() < 7 {
		return g.err != nil
	}
	h, err := g.r.Peek(7)
	if err != nil || len(h) < 7 {
		return false
	}
	size := binary.BigEndian.Uint32(h[3:7])
	if g.noHeartbeat && !g.tuned && h[0] == frameMethod && size == tunePayload {
		return g.r.Buffered() >= 7+int(size)+1 // read whole (tune)
	}
	if h[0] != frameHeaderType {
		return true
	}
	// A content header is read whole.
	return g.r.Buffered() >= 7+int(size)+1
}

// next reads the next frame's header and either queues it to stream the
// rest through, or holds a whole content header frame and checks it.
func (g *guardedConn) next() error {
	if err := g.err; err != nil {
		g.err = nil
		return err
	}
	if _, err := io.ReadFull(g.r, g.hdr[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(g.hdr[3:7])
	if g.noHeartbeat && !g.tuned && g.hdr[0] == frameMethod && size == tunePayload {
		return g.tune(size)
	}
	if g.hdr[0] != frameHeaderType || size > maxHeldFrame {
		g.out, g.pass = g.hdr[:], int(size)+1
		return nil
	}
	if err := g.readFrame(size); err != nil {
		return err
	}
	g.out = g.check(g.buf)
	return nil
}

// tunePayload is connection.tune's payload size: class, method,
// channel-max (2), frame-max (4), heartbeat (2).
const tunePayload = 12

// tune reads a method frame of connection.tune's size whole and, when it
// is connection.tune on channel 0, zeroes the heartbeat it proposes.
func (g *guardedConn) tune(size uint32) error {
	if err := g.readFrame(size); err != nil {
		return err
	}
	p := g.buf[7 : 7+size]
	if binary.BigEndian.Uint16(g.hdr[1:3]) == 0 && binary.BigEndian.Uint16(p) == classConnection && binary.BigEndian.Uint16(p[2:]) == methodConnectionTune {
		g.tuned = true
		p[10], p[11] = 0, 0
	}
	g.out = g.buf
	return nil
}

// readFrame reads the rest of the frame whose header is in g.hdr into
// g.buf, whole.
func (g *guardedConn) readFrame(size uint32) error {
	need := 7 + int(size) + 1
	if cap(g.buf) < need {
		g.buf = make([]byte, need)
	}
	g.buf = g.buf[:need]
	copy(g.buf, g.hdr[:])
	_, err := io.ReadFull(g.r, g.buf[7:])
	return err
}

// check returns frame unchanged when the client can read its headers, or a
// rewritten frame it can read.
func (g *guardedConn) check(frame []byte) []byte {
	payload := frame[7 : len(frame)-1]
	start, end, ok := headersSpan(payload)
	if !ok {
		return frame
	}
	table := payload[start+4 : end]
	entries, bad := 0, false
	stop := wire.ScanTable(table, func(e wire.Entry) {
		entries++
		if _, over := e.Over(); over {
			bad = true
		}
	})
	if !bad && stop == len(table) && entries <= wire.MaxEntries {
		return frame
	}
	kept, moved, reason := splitHeaders(table, entries, stop)
	out := make([]byte, 0, len(frame)+len(reason)+64)
	out = append(out, frame[:7]...)
	out = append(out, payload[:start]...)
	body := wire.AppendLongstr(kept, wire.UnreadableHeader, reason)
	full := wire.AppendBytes(body, wire.KeptHeader, moved)
	if limit := int64(g.maxFrame.Load()); limit > 0 && int64(start+4+len(full)+len(payload)-end) > limit-8 {
		// The original bytes do not fit beside the rest: keep the message
		// and say what could not be kept.
		body = wire.AppendLongstr(kept, wire.UnreadableHeader, reason+fmt.Sprintf("; the %d bytes of these headers were too large to keep", len(moved)))
	} else {
		body = full
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	out = append(out, payload[end:]...)
	out = append(out, frameEndOctet)
	binary.BigEndian.PutUint32(out[3:7], uint32(len(out)-8))
	g.rewritten.Add(1)
	return out
}

// headersSpan finds the headers table in a content header payload: start
// is the offset of its 4-byte length, end the offset after it. ok is false
// when there is no headers property, the flags continue into a second word
// (never sent by RabbitMQ for basic), or the payload is malformed (the
// client then refuses it as before).
func headersSpan(p []byte) (start, end int, ok bool) {
	if len(p) < 14 {
		return 0, 0, false
	}
	flags := binary.BigEndian.Uint16(p[12:14])
	if flags&propHeaders == 0 || flags&propContinued != 0 {
		return 0, 0, false
	}
	off := 14
	for _, bit := range []uint16{propContentType, propEncoding} {
		if flags&bit != 0 {
			if off >= len(p) {
				return 0, 0, false
			}
			off += 1 + int(p[off])
		}
	}
	if off+4 > len(p) {
		return 0, 0, false
	}
	size := int(binary.BigEndian.Uint32(p[off : off+4]))
	if size < 0 || off+4+size > len(p) {
		return 0, 0, false
	}
	return off, off + 4 + size, true
}

// splitHeaders divides a table the client cannot read: kept holds the
// entries it can read (fewer than the entry limit, leaving room for the
// two added headers), moved the rest as table bytes; reason names the
// first problem.
func splitHeaders(table []byte, entries, stop int) (kept, moved []byte, reason string) {
	var first *wire.Limit
	if entries > wire.MaxEntries {
		first = &wire.Limit{Entries: entries}
	}
	n := 0
	wire.ScanTable(table, func(e wire.Entry) {
		raw := table[e.Start:e.End]
		l, over := e.Over()
		key := string(e.Key)
		if over || n >= wire.MaxEntries-2 || key == wire.UnreadableHeader || key == wire.KeptHeader {
			if over && first == nil {
				first = &l
			}
			moved = append(moved, raw...)
			return
		}
		n++
		kept = append(kept, raw...)
	})
	if stop < len(table) {
		moved = append(moved, table[stop:]...)
		if first == nil {
			reason = fmt.Sprintf("the headers table cannot be read from byte %d on (an unknown field type or a truncated value)", stop)
		}
	}
	if first != nil {
		reason = first.String()
	}
	return kept, moved, reason
}
