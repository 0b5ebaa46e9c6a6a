package transport

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckHeadersAcceptsEveryFieldTypeAndNamesWhereAnOtherSits(t *testing.T) {
	ok := Table{
		"n": nil, "b": true, "i8": int8(1), "u8": uint8(1), "i16": int16(1), "u16": uint16(1),
		"i32": int32(1), "u32": uint32(1), "i": 1, "i64": int64(1), "f32": float32(1), "f64": 1.5,
		"u": uint(1), "u64": uint64(math.MaxInt64),
		"s": "x", "raw": []byte("x"), "t": time.Unix(0, 0),
		"table": Table{"k": "v"}, "map": map[string]any{"k": []any{1, "x"}}, "list": []any{Table{"k": 1}},
	}
	if err := CheckHeaders(ok); err != nil {
		t.Fatalf("CheckHeaders refused a table of field types: %v", err)
	}
	type point struct{ X int }
	for _, c := range []struct {
		h    Table
		want string
	}{
		{Table{"x-p": point{}}, `header "x-p": a transport.point has no AMQP 0-9-1 field type`},
		{Table{"x-meta": []any{map[string]any{"k": uint64(math.MaxUint64)}}}, `header "x-meta" [0] field "k": the unsigned integer 18446744073709551615 (uint64) is above 9223372036854775807`},
		{Table{"x-u": uint(math.MaxInt64) + 1}, `header "x-u": the unsigned integer 9223372036854775808 (uint) is above`},
		{Table{"x-t": Table{"in": []any{1, struct{}{}}}}, `header "x-t" field "in" [1]: a struct {} has no`},
	} {
		err := CheckHeaders(c.h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckHeaders(%v) = %v, want an error containing %q", c.h, err, c.want)
		}
	}
}
