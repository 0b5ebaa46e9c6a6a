package acemq

import (
	"strings"
	"testing"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
)

// FuzzReadEnvelope feeds arbitrary values, in each shape a header can
// arrive in, to every envelope header: the read never panics and always
// yields a sendable identity.
func FuzzReadEnvelope(f *testing.F) {
	f.Add("1", int64(1), 1.0, []byte("1"), uint8(0), "fx.plain", "")
	f.Add("", int64(-1), -0.5, []byte{0xff}, uint8(1), "", "")
	f.Add("9223372036854775808", int64(1)<<62, 1e300, []byte("+3"), uint8(2), "k", "mid")
	f.Add("a,,b", int64(0), 3.7, []byte(""), uint8(3), "", "m")
	f.Add("2026-02-03T04:05:06.789Z", int64(1770091506789), 1770091506789.0, []byte("2026-02-03T04:05:06Z"), uint8(4), "r", "")

	names := []string{header.ID, header.Type, header.Version, header.Correlation, header.Causation,
		header.Attempt, header.FirstSeen, header.Origin, header.Error, header.Claim, header.Route,
		header.RoutePosition, header.RouteID, header.ReplyTo, header.ReplayedAt, header.ReplayCount}
	f.Fuzz(func(t *testing.T, s string, i int64, fl float64, b []byte, shape uint8, routingKey, messageID string) {
		values := []any{s, i, fl, b, int32(i), uint64(i), float32(fl), []any{s}, transport.Table{"x": s}, nil, true}
		h := transport.Table{"x-death": []any{transport.Table{"count": i}}, "x-acemq-unknown": s}
		for n, name := range names {
			h[name] = values[(int(shape)+n)%len(values)]
		}
		e := readEnvelope(h, routingKey, messageID, s)
		if e.Attempt < 1 || e.Version < 1 || e.ID == "" || e.Type == "" || e.CorrelationID == "" || e.RoutePosition < 0 {
			t.Fatalf("read %+v from %v", e, h)
		}
		for name := range e.Headers() {
			if len(name) >= len(header.ReservedPrefix) && name[:len(header.ReservedPrefix)] == header.ReservedPrefix {
				t.Fatalf("reserved header %s stayed visible", name)
			}
		}
		ReplayedAt(e)
		ReplayCount(e)
		r := e.render()
		for name, v := range r {
			engine := name == header.ReplyTo || strings.HasPrefix(name, header.ReservedPrefix)
			if v == nil || (engine && v == "") {
				t.Fatalf("render wrote %s as %#v", name, v)
			}
		}
	})
}

// FuzzCodecDecode decodes arbitrary bytes under arbitrary content types
// with every built-in codec and a composite: a value or an error, never a
// panic.
func FuzzCodecDecode(f *testing.F) {
	f.Add("application/json", []byte(`{"id":"o-1"}`))
	f.Add("", []byte(`"{\"id\":\"o-1\"}"`))
	f.Add("text/plain; charset=utf-8", []byte("héllo"))
	f.Add("TEXT/JSON", []byte{0xff, 0xfe})
	f.Add("application/vnd.x+json;v=1", []byte(`[1,2`))
	f.Add("application/octet-stream", []byte{0, 1, 2})
	f.Add(";", []byte(nil))
	codecs := []Codec{JSON(), Text(), Bytes(), Composite(JSON(), Text(), Bytes()), Composite(Text())}
	f.Fuzz(func(t *testing.T, contentType string, data []byte) {
		for _, c := range codecs {
			c.Claims(contentType)
			var a any
			var s string
			var b []byte
			var m map[string]any
			for _, v := range []any{&a, &s, &b, &m, nil, s, (*string)(nil)} {
				_ = c.Decode(contentType, data, v)
			}
		}
	})
}
