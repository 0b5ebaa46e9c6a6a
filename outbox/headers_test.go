package outbox

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestStoredHeadersKeepTheirTypes(t *testing.T) {
	in := map[string]any{
		"s": "text", "b": true, "i8": int8(-3), "i16": int16(300), "i32": int32(7), "i64": int64(1 << 40),
		"u8": uint8(200), "u16": uint16(60000), "u32": uint32(4000000000),
		"f32": float32(1.5), "f64": 2.25, "nan": math.Inf(1), "bytes": []byte{0, 1, 255},
		"time":  time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		"table": map[string]any{"n": int32(1), "inner": map[string]any{"x": "y"}},
		"array": []any{"a", int64(2), []any{false}},
	}
	s, err := encodeHeaders(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeHeaders(s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the headers:\n in %#v\nout %#v\njson %s", in, out, s)
	}
	if _, err := encodeHeaders(map[string]any{"c": make(chan int)}); err == nil {
		t.Fatal("a channel value was stored")
	}
}
