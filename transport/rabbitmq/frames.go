package rabbitmq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// The owned publishing connection (own.go) writes basic.publish, its
// content header and body frames itself, straight into one buffer, instead
// of through amqp091-go, which builds a bytes.Buffer per frame and a slice
// per short string. The bytes are those amqp091-go writes for the same
// publish: the same property flags for the same message, and for every Go
// value in a headers table the field type amqp091-go's writeField picks.

const (
	frameMethod    = 1
	frameHeartbeat = 8

	classBasic      = 60
	classConfirm    = 85
	classChannel    = 20
	classConnection = 10

	methodBasicPublish      = 40
	methodBasicReturn       = 50
	methodBasicAck          = 80
	methodBasicNack         = 120
	methodConfirmSelect     = 10
	methodSelectOk          = 11
	methodChannelClose      = 40
	methodCloseOk           = 41 // channel.close-ok
	methodConnectionClose   = 50
	methodConnectionCloseOk = 51

	propDeliveryMode  = 0x1000
	propPriority      = 0x0800
	propCorrelationID = 0x0400
	propReplyTo       = 0x0200
	propExpiration    = 0x0100 // read past, never written
	propMessageID     = 0x0080

	// maxTableDepth bounds nesting while encoding, so a table that holds
	// itself is refused instead of recursing for ever (amqp091-go reads no
	// deeper than 32 levels anyway).
	maxTableDepth = 64
)

// errUnencodable is the cause an encoding failure wraps; Publish adds
// transport.ErrNotWritten and transport.ErrUnencodable.
var errUnencodable = errors.New("value cannot be encoded")

// appendPublish appends the frames of one publish of msg on channel ch:
// basic.publish, the content header and the body split into frames of at
// most frameMax-8 bytes (none for an empty body). frameMax 0 means no
// limit was negotiated. On failure dst is returned unchanged in length
// with an error saying which value could not be encoded, or a
// *transport.LimitError when the content header frame is over frameMax.
func appendPublish(dst []byte, ch uint16, frameMax int, msg *transport.Message) ([]byte, error) {
	start := len(dst)
	fail := func(err error) ([]byte, error) { return dst[:start], err }
	if err := transport.CheckShortStrings(msg); err != nil {
		return fail(fmt.Errorf("%w: %w", err, errUnencodable))
	}

	// basic.publish: reserved short, exchange, routing key, bits.
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, ch)
	dst = append(dst, 0, classBasic, 0, methodBasicPublish, 0, 0)
	dst = appendShortstr(dst, msg.Exchange)
	dst = appendShortstr(dst, msg.RoutingKey)
	var bits byte
	if msg.Mandatory {
		bits = 1
	}
	dst = append(dst, bits)
	dst = endFrame(dst, f)

	// Content header: class, weight, body size, flags, properties in order.
	f = len(dst)
	dst = appendFrameHeader(dst, frameHeaderType, ch)
	dst = append(dst, 0, classBasic, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(len(msg.Body)))
	var flags uint16
	if msg.ContentType != "" {
		flags |= propContentType
	}
	if len(msg.Headers) > 0 {
		flags |= propHeaders
	}
	if msg.DeliveryMode > 0 {
		flags |= propDeliveryMode
	}
	if msg.Priority > 0 {
		flags |= propPriority
	}
	if msg.CorrelationID != "" {
		flags |= propCorrelationID
	}
	if msg.ReplyTo != "" {
		flags |= propReplyTo
	}
	if msg.MessageID != "" {
		flags |= propMessageID
	}
	dst = binary.BigEndian.AppendUint16(dst, flags)
	if flags&propContentType != 0 {
		dst = appendShortstr(dst, msg.ContentType)
	}
	if flags&propHeaders != 0 {
		var err error
		if dst, err = appendTable(dst, msg.Headers, 0); err != nil {
			return fail(fmt.Errorf("header %w", err))
		}
	}
	if flags&propDeliveryMode != 0 {
		dst = append(dst, msg.DeliveryMode)
	}
	if flags&propPriority != 0 {
		dst = append(dst, msg.Priority)
	}
	if flags&propCorrelationID != 0 {
		dst = appendShortstr(dst, msg.CorrelationID)
	}
	if flags&propReplyTo != 0 {
		dst = appendShortstr(dst, msg.ReplyTo)
	}
	if flags&propMessageID != 0 {
		dst = appendShortstr(dst, msg.MessageID)
	}
	dst = endFrame(dst, f)
	if n := len(dst) - f; frameMax > 0 && n > frameMax {
		// RabbitMQ would close the whole connection on it.
		return fail(&transport.LimitError{Limit: transport.LimitFrameMax, Size: n, Max: frameMax})
	}

	chunk := len(msg.Body)
	if frameMax > 8 {
		chunk = frameMax - 8
	}
	for body := msg.Body; len(body) > 0; {
		n := min(chunk, len(body))
		f = len(dst)
		dst = appendFrameHeader(dst, frameBody, ch)
		dst = append(dst, body[:n]...)
		dst = endFrame(dst, f)
		body = body[n:]
	}
	return dst, nil
}

const frameBody = 3

// appendFrameHeader appends a frame header with its size left zero for
// endFrame to fill in.
func appendFrameHeader(dst []byte, typ byte, ch uint16) []byte {
	return append(dst, typ, byte(ch>>8), byte(ch), 0, 0, 0, 0)
}

// endFrame fills in the size of the frame that starts at start and
// appends the frame-end octet.
func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+3:start+7], uint32(len(dst)-start-7))
	return append(dst, frameEndOctet)
}

// appendMethodFrame appends a method frame whose arguments are args.
func appendMethodFrame(dst []byte, ch, class, method uint16, args ...byte) []byte {
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, ch)
	dst = binary.BigEndian.AppendUint16(dst, class)
	dst = binary.BigEndian.AppendUint16(dst, method)
	dst = append(dst, args...)
	return endFrame(dst, f)
}

// appendShortstr appends s; the caller has checked it is at most 255 bytes.
func appendShortstr(dst []byte, s string) []byte {
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// appendTable appends a field table (its 4-byte length and entries).
func appendTable(dst []byte, t map[string]any, depth int) ([]byte, error) {
	if depth > maxTableDepth {
		return dst, fmt.Errorf("tables nest deeper than %d levels (does a table hold itself?): %w", maxTableDepth, errUnencodable)
	}
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for k, v := range t {
		if len(k) > 255 {
			return dst, fmt.Errorf("name %.40q... is %d bytes; AMQP allows at most 255: %w", k, len(k), errUnencodable)
		}
		dst = appendShortstr(dst, k)
		var err error
		if dst, err = appendField(dst, v, depth); err != nil {
			return dst, fmt.Errorf("%q: %w", k, err)
		}
	}
	binary.BigEndian.PutUint32(dst[at:at+4], uint32(len(dst)-at-4))
	return dst, nil
}

// appendField appends one field value with the type tag amqp091-go's
// writeField gives the value toAMQPTable hands it (table.go): an int is a
// 32-bit 'I' where it fits and a 64-bit 'l' where it does not, and an
// unsigned value is written as the next wider signed type, because bunny
// cannot read 'B', 'u' or 'i' (uint8 as 's', uint16 as 'I', uint32, uint
// and uint64 as 'l'; a uint or uint64 above math.MaxInt64 is refused).
// transport.Table and map[string]any are written as the nested table
// amqp091-go writes for the amqp.Table they are converted to.
func appendField(dst []byte, v any, depth int) ([]byte, error) {
	be := binary.BigEndian
	switch v := v.(type) {
	case bool:
		var b byte
		if v {
			b = 1
		}
		return append(dst, 't', b), nil
	case uint8:
		return be.AppendUint16(append(dst, 's'), uint16(v)), nil
	case int8:
		return append(dst, 'b', byte(v)), nil
	case int16:
		return be.AppendUint16(append(dst, 's'), uint16(v)), nil
	case int:
		// amqp091-go writes an int as a 32-bit 'I', cutting off the high
		// bits of a larger one; the same bytes where it fits, a 64-bit 'l'
		// where it does not, so no value is silently changed.
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return be.AppendUint32(append(dst, 'I'), uint32(v)), nil
		}
		return be.AppendUint64(append(dst, 'l'), uint64(v)), nil
	case int32:
		return be.AppendUint32(append(dst, 'I'), uint32(v)), nil
	case int64:
		return be.AppendUint64(append(dst, 'l'), uint64(v)), nil
	case uint16:
		return be.AppendUint32(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return be.AppendUint64(append(dst, 'l'), uint64(v)), nil
	case uint, uint64:
		n, ok := wire.Int(v)
		if !ok {
			return dst, fmt.Errorf("%s: %w", wire.UnsignedTooLarge(v), errUnencodable)
		}
		return be.AppendUint64(append(dst, 'l'), uint64(n)), nil
	case float32:
		return be.AppendUint32(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return be.AppendUint64(append(dst, 'd'), math.Float64bits(v)), nil
	case amqp.Decimal:
		return be.AppendUint32(append(dst, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		dst = be.AppendUint32(append(dst, 'S'), uint32(len(v)))
		return append(dst, v...), nil
	case []byte:
		dst = be.AppendUint32(append(dst, 'x'), uint32(len(v)))
		return append(dst, v...), nil
	case time.Time:
		return be.AppendUint64(append(dst, 'T'), uint64(v.Unix())), nil
	case nil:
		return append(dst, 'V'), nil
	case []any:
		if depth >= maxTableDepth {
			return dst, fmt.Errorf("arrays nest deeper than %d levels (does an array hold itself?): %w", maxTableDepth, errUnencodable)
		}
		dst = append(dst, 'A')
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		for i, e := range v {
			var err error
			if dst, err = appendField(dst, e, depth+1); err != nil {
				return dst, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		be.PutUint32(dst[at:at+4], uint32(len(dst)-at-4))
		return dst, nil
	case transport.RawField:
		if len(v) == 0 {
			return dst, fmt.Errorf("an empty raw field: %w", errUnencodable)
		}
		return append(dst, v...), nil
	case transport.Table:
		return appendTable(append(dst, 'F'), v, depth+1)
	case amqp.Table:
		return appendTable(append(dst, 'F'), v, depth+1)
	case map[string]any:
		return appendTable(append(dst, 'F'), v, depth+1)
	}
	return dst, fmt.Errorf("value of type %T has no AMQP field type (use a string, signed integer, bool, float, []byte, time.Time, nested table or []any): %w", v, errUnencodable)
}
