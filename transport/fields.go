package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/internal/wire"
)

// ErrUnencodable marks a publish refused before anything was written
// because the message cannot be put on the wire as it stands: a header
// value of a type AMQP 0-9-1 has no field for. Sending it again will not
// help; the caller has to change the message. It is always wrapped
// together with ErrNotWritten.
var ErrUnencodable = errors.New("transport: the message cannot be encoded")

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
