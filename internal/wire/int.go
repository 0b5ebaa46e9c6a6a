// Package wire holds the small facts about AMQP field-table values that
// both the engine and the in-process broker need.
package wire

import (
	"fmt"
	"math"
)

// Int reports v as an int64 when it is an integer of any width, signed or
// unsigned. An unsigned value beyond int64 is not an int64 (false), never a
// wrapped negative number. Field tables carry integers in whatever width
// the sender chose; RabbitMQ compares them by value.
func Int(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint:
		return fromUint(uint64(x))
	case uint64:
		return fromUint(x)
	}
	return 0, false
}

func fromUint(u uint64) (int64, bool) {
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// Unsigned Go values in a header are written as the next wider signed
// type, the only integers every family client reads (bunny's reader dies
// on 'B', 'u' and 'i'): uint8 as int16, uint16 as int32, uint32, uint and
// uint64 as int64. Signed returns v so widened, and v itself when it is
// anything else (an int, which fits int32 on the wire or is written as a
// 64-bit 'l', is the caller's). ok is false for a uint or uint64 above
// math.MaxInt64, which no signed type holds: such a header is refused
// (UnsignedTooLarge says why).
func Signed(v any) (any, bool) {
	switch x := v.(type) {
	case uint8:
		return int16(x), true
	case uint16:
		return int32(x), true
	case uint32:
		return int64(x), true
	case uint, uint64:
		n, ok := Int(x)
		if !ok {
			return v, false
		}
		return n, true
	}
	return v, true
}

// UnsignedTooLarge is the words for a uint or uint64 header value above
// math.MaxInt64, for an error sentence.
func UnsignedTooLarge(v any) string {
	return fmt.Sprintf("the unsigned integer %d (%T) is above %d, the largest integer AMQP clients read (a signed 64-bit 'l'); send it as a string", v, v, int64(math.MaxInt64))
}
