// Package wire holds the small facts about AMQP field-table values that
// both the engine and the in-process broker need.
package wire

import "math"

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
