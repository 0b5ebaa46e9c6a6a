package rabbitmq

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The frame reader of the publishing connection AceMQ owns (own.go): it
// reads AMQP 0-9-1 frames (type, channel, size, payload, frame-end) and the
// arguments of the few methods a publishing connection receives. Nothing
// here trusts a length the broker sent beyond the bytes actually there.

// inFrame is one frame read: its payload aliases the reader's buffer and is
// valid until the next read.
type inFrame struct {
	typ     byte
	channel uint16
	payload []byte
}

// frameReader reads frames from r, refusing one whose payload is larger
// than max bytes (the negotiated frame_max less the 8 bytes of framing).
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// errFrameEnd is a frame whose last byte is not 0xCE.
var errFrameEnd = errors.New("rabbitmq: the broker sent a frame that does not end with the frame-end octet 0xCE; the stream cannot be read further")

// errProtocolRefused is a server answering the protocol header with one of
// its own: it does not speak AMQP 0-9-1 (and closes).
var errProtocolRefused = errors.New("rabbitmq: the server refused AMQP 0-9-1 (it answered with a protocol header of its own); is this a RabbitMQ AMQP port?")

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next reads one frame.
func (fr *frameReader) next() (inFrame, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return inFrame{}, err
	}
	if string(hdr[:4]) == "AMQP" {
		return inFrame{}, errProtocolRefused
	}
	size := binary.BigEndian.Uint32(hdr[3:7])
	if uint64(size) > uint64(fr.max) {
		return inFrame{}, fmt.Errorf("rabbitmq: the broker sent a frame of %d bytes, over the negotiated frame_max of %d; the stream cannot be read further", uint64(size)+8, fr.max+8)
	}
	need := int(size) + 1
	if cap(fr.buf) < need {
		fr.buf = make([]byte, need)
	}
	b := fr.buf[:need]
	if _, err := io.ReadFull(fr.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return inFrame{}, err
	}
	if b[size] != frameEndOctet {
		return inFrame{}, errFrameEnd
	}
	return inFrame{typ: hdr[0], channel: binary.BigEndian.Uint16(hdr[1:3]), payload: b[:size]}, nil
}

// args reads a method's arguments in order. The first read past the end
// sets bad; later reads return zero values, so a caller checks ok once.
type args struct {
	p   []byte
	bad bool
}

func (a *args) take(n int) []byte {
	if a.bad || len(a.p) < n {
		a.bad = true
		return nil
	}
	b := a.p[:n]
	a.p = a.p[n:]
	return b
}

func (a *args) octet() byte {
	if b := a.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (a *args) short() uint16 {
	if b := a.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (a *args) long() uint32 {
	if b := a.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (a *args) longlong() uint64 {
	if b := a.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (a *args) shortstr() string {
	n := int(a.octet())
	return string(a.take(n))
}

// longstr returns the bytes of a long string (also used to skip a field
// table, which is a long string's length and bytes).
func (a *args) longstr() []byte {
	n := a.long()
	if uint64(n) > uint64(len(a.p)) {
		a.bad = true
		return nil
	}
	return a.take(int(n))
}

func (a *args) ok() bool { return !a.bad }

// methodID reads a method frame's class and method.
func methodID(p []byte) (class, method uint16, rest []byte, ok bool) {
	if len(p) < 4 {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint16(p[0:2]), binary.BigEndian.Uint16(p[2:4]), p[4:], true
}

// closeArgs are the arguments of connection.close and channel.close.
type closeArgs struct {
	code          uint16
	text          string
	class, method uint16
}

func readClose(p []byte) (closeArgs, bool) {
	a := args{p: p}
	c := closeArgs{code: a.short(), text: a.shortstr(), class: a.short(), method: a.short()}
	return c, a.ok()
}

// startArgs are the parts of connection.start a client uses.
type startArgs struct {
	major, minor byte
	mechanisms   string
}

func readStart(p []byte) (startArgs, bool) {
	a := args{p: p}
	s := startArgs{major: a.octet(), minor: a.octet()}
	a.longstr() // server-properties, a table
	s.mechanisms = string(a.longstr())
	a.longstr() // locales
	return s, a.ok()
}

// tuneArgs are connection.tune's proposals.
type tuneArgs struct {
	channelMax uint16
	frameMax   uint32
	heartbeat  uint16
}

func readTune(p []byte) (tuneArgs, bool) {
	a := args{p: p}
	t := tuneArgs{channelMax: a.short(), frameMax: a.long(), heartbeat: a.short()}
	return t, a.ok()
}

// readAck reads basic.ack's or basic.nack's delivery tag and multiple bit.
func readAck(p []byte) (tag uint64, multiple bool, ok bool) {
	a := args{p: p}
	tag = a.longlong()
	bits := a.octet()
	return tag, bits&1 != 0, a.ok()
}

// readReturn reads basic.return: reply code, reply text, exchange, routing
// key.
func readReturn(p []byte) (*returned, bool) {
	a := args{p: p}
	r := &returned{code: a.short(), text: a.shortstr()}
	r.key.exchange = a.shortstr()
	r.key.routingKey = a.shortstr()
	return r, a.ok()
}

// maxScratch bounds the encoding buffer a publisher keeps between
// publishes; a larger publish's buffer is dropped after use.
const maxScratch = 1 << 20

// heartbeatFrame is one heartbeat: type 8 on channel 0, no payload.
var heartbeatFrame = [8]byte{frameHeartbeat, 0, 0, 0, 0, 0, 0, frameEndOctet}

// returned is what a basic.return says.
type returned struct {
	code uint16
	text string
	key  returnKey
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
