package rabbitmq

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// transport.ContentHeaderFrameSize is what Publish checks against
// frame_max before writing: it must count exactly what appendPublish
// writes, or a header just over the limit would close the connection (or
// one just under it be refused).
func TestContentHeaderFrameSizeCountsWhatTheNativeWriterWrites(t *testing.T) {
	msgs := []*transport.Message{
		{RoutingKey: "q"},
		{Exchange: "x", RoutingKey: "k", Mandatory: true, Body: []byte("body"), Properties: transport.Properties{
			ContentType: "application/json", MessageID: "id-1", ReplyTo: "r", DeliveryMode: 2, Priority: 3,
		}},
		{RoutingKey: "q", Properties: transport.Properties{Headers: transport.Table{
			"s": "text", "b": []byte{1, 2}, "t": true, "i8": int8(-1), "u8": uint8(1), "i16": int16(-2), "u16": uint16(2),
			"i32": int32(-3), "u32": uint32(3), "i": 7, "ibig": math.MaxInt32 + 1, "ineg": -1 << 40, "i64": int64(1 << 40),
			"f32": float32(1.5), "f64": 2.5, "ts": time.Unix(1700000000, 0), "nil": nil,
			"arr":    []any{"a", int32(1), []any{int64(2)}, transport.Table{"k": "v"}},
			"nested": transport.Table{"inner": map[string]any{"deep": []any{}}},
			"big":    strings.Repeat("x", 70000),
		}}},
	}
	for i, m := range msgs {
		buf, err := appendPublish(nil, 1, 0, m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		method := int(binary.BigEndian.Uint32(buf[3:7])) + 8
		header := int(binary.BigEndian.Uint32(buf[method+3:method+7])) + 8
		if buf[method] != 2 {
			t.Fatalf("message %d: the second frame has type %d, want 2 (content header)", i, buf[method])
		}
		if got := transport.ContentHeaderFrameSize(&m.Properties); got != header {
			t.Fatalf("message %d: ContentHeaderFrameSize = %d, appendPublish wrote a %d-byte content header frame", i, got, header)
		}
	}
}
