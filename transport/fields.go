package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/internal/wire"
)

// ErrUnencodable marks a publish refused before anything was written
// because the message cannot be put on the wire as it stands: a header
// value of a type AMQP 0-9-1 has no field for, or a short string over 255
// bytes (ErrShortString). Sending it again will not help; the caller has
// to change the message. It is always wrapped together with
// ErrNotWritten.
var ErrUnencodable = errors.New("transport: the message cannot be encoded")

// ErrShortString marks a publish refused before anything was written
// because a value AMQP 0-9-1 writes as a short string is over 255 bytes:
// the exchange name, the routing key, or the content type, message id,
// correlation id or reply-to property. It is always wrapped together with ErrUnencodable
// and ErrNotWritten; CheckShortStrings makes the error.
var ErrShortString = errors.New("transport: a short string is over 255 bytes")

// MaxShortString is the longest short string AMQP 0-9-1 can carry, in
// bytes.
const MaxShortString = 255

// CheckShortStrings returns an error wrapping ErrShortString that names
// the first of msg's exchange, routing key, content type, message id,
// correlation id and reply-to over MaxShortString bytes ("the message id is 60000 bytes;
// AMQP 0-9-1 allows at most 255"), or nil. Every transport calls it before
// writing, so a long value is refused the same way on each.
func CheckShortStrings(msg *Message) error {
	for _, s := range [...]struct{ name, v string }{
		{"exchange", msg.Exchange}, {"routing key", msg.RoutingKey},
		{"content type", msg.ContentType}, {"message id", msg.MessageID},
		{"correlation id", msg.CorrelationID}, {"reply-to", msg.ReplyTo},
	} {
		if len(s.v) > MaxShortString {
			return fmt.Errorf("the %s is %d bytes; AMQP 0-9-1 allows at most %d: %w", s.name, len(s.v), MaxShortString, ErrShortString)
		}
	}
	return nil
}

// CheckHeaders reports the first header value that AMQP 0-9-1 cannot carry,
// naming where it sits ("header \"x-meta\" [0] field \"k\": ..."), or nil.
// The values it accepts are the field types every transport writes: nil,
// bool, every signed and unsigned integer type, float32, float64, string,
// []byte, time.Time, a Table or map[string]any of those, and []any of
// those. A transport may accept more (the RabbitMQ driver also takes its
// client's decimal type).
//
// Unsigned values are written as the next wider signed type, the only
// integers every AMQP client of the family reads (uint8 as a signed
// 16-bit 's', uint16 as a 32-bit 'I', uint32, uint and uint64 as a 64-bit
// 'l'); a uint or uint64 above math.MaxInt64 fits no signed type and is
// refused here.
func CheckHeaders(t Table) error {
	for k, v := range t {
		if err := checkField(v); err != nil {
			return fmt.Errorf("header %q%s", k, err)
		}
	}
	return nil
}

func checkField(v any) error {
	switch v := v.(type) {
	case nil, bool, int8, uint8, int16, uint16, int32, uint32, int, int64, float32, float64, string, []byte, time.Time:
		return nil
	case uint, uint64:
		if _, ok := wire.Int(v); !ok {
			return fmt.Errorf(": %s", wire.UnsignedTooLarge(v))
		}
		return nil
	case Table:
		return checkTable(v)
	case map[string]any:
		return checkTable(v)
	case []any:
		for i, e := range v {
			if err := checkField(e); err != nil {
				return fmt.Errorf(" [%d]%s", i, err)
			}
		}
		return nil
	}
	return fmt.Errorf(": a %T has no AMQP 0-9-1 field type (use a string, a number, a bool, []byte, time.Time, a table or a list of those)", v)
}

func checkTable(t map[string]any) error {
	for k, e := range t {
		if err := checkField(e); err != nil {
			return fmt.Errorf(" field %q%s", k, err)
		}
	}
	return nil
}
