package wire

import (
	"math"
	"testing"
)

func TestIntReadsEveryWidthByValueAndRefusesUnsignedOverflow(t *testing.T) {
	for _, c := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{int8(-5), -5, true}, {int16(-5), -5, true}, {int32(-5), -5, true}, {int64(-5), -5, true}, {int(-5), -5, true},
		{uint8(5), 5, true}, {uint16(5), 5, true}, {uint32(5), 5, true}, {uint(5), 5, true}, {uint64(5), 5, true},
		{uint64(math.MaxInt64), math.MaxInt64, true},
		{uint64(math.MaxInt64) + 1, 0, false},
		{uint64(math.MaxUint64), 0, false},
		{"5", 0, false}, {5.0, 0, false}, {nil, 0, false},
	} {
		got, ok := Int(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Int(%T %v) = %d, %v; want %d, %v", c.in, c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSignedWidensUnsignedValuesAndRefusesOverflow(t *testing.T) {
	for _, c := range []struct {
		in, want any
		ok       bool
	}{
		{uint8(200), int16(200), true}, {uint16(65000), int32(65000), true}, {uint32(4000000000), int64(4000000000), true},
		{uint(9), int64(9), true}, {uint64(math.MaxInt64), int64(math.MaxInt64), true},
		{uint64(math.MaxInt64) + 1, uint64(math.MaxInt64) + 1, false},
		{int(5), int(5), true}, {"s", "s", true},
	} {
		got, ok := Signed(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Signed(%T %v) = %T %v, %v; want %T %v, %v", c.in, c.in, got, got, ok, c.want, c.want, c.ok)
		}
	}
}
