package acemq

import (
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
)

func TestEnvelopeTolerantReadOfIntegerFields(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  int // attempt read from the header; 1 is the default
	}{
		{"int", int(3), 3},
		{"int8", int8(3), 3},
		{"int16", int16(3), 3},
		{"int32", int32(3), 3},
		{"int64", int64(3), 3},
		{"uint", uint(3), 3},
		{"uint8", uint8(3), 3},
		{"uint16", uint16(3), 3},
		{"uint32", uint32(3), 3},
		{"uint64", uint64(3), 3},
		{"uint64 beyond int64 is unreadable", uint64(math.MaxUint64), 1},
		{"float64 truncated toward zero", float64(3.9), 3},
		{"float32 truncated toward zero", float32(4.5), 4},
		{"negative float truncates to a value below 1", float64(-0.9), 1},
		{"huge float is unreadable", float64(1e300), 1},
		{"NaN is unreadable", math.NaN(), 1},
		{"decimal text", "5", 5},
		{"decimal text with plus sign", "+6", 6},
		{"decimal text with minus sign is below 1", "-6", 1},
		{"bytes as decimal text", []byte("7"), 7},
		{"non-decimal text is unreadable", "seven", 1},
		{"hex text is unreadable", "0x8", 1},
		{"empty string is absent", "", 1},
		{"zero is below 1", int32(0), 1},
		{"boolean is unreadable", true, 1},
		{"time is unreadable", time.Now(), 1},
		{"nested table is unreadable", transport.Table{"a": 1}, 1},
		{"nil is absent", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := readEnvelope(transport.Table{header.Attempt: tt.value, header.Version: tt.value}, "k", "m", "")
			if e.Attempt != tt.want || e.Version != tt.want {
				t.Errorf("attempt/version from %#v = %d/%d, want %d", tt.value, e.Attempt, e.Version, tt.want)
			}
		})
	}
}

func TestEnvelopeTolerantReadOfStringFields(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  string // correlation; the id "m" is the fallback
	}{
		{"string as is", "corr", "corr"},
		{"bytes as UTF-8", []byte("corr"), "corr"},
		{"invalid UTF-8 bytes are unreadable", []byte{0xff, 0xfe}, "m"},
		{"invalid UTF-8 string is unreadable, as bytes are", "\xff\xfe", "m"},
		{"int64 as decimal", int64(-42), "-42"},
		{"int8 as decimal", int8(7), "7"},
		{"uint64 as decimal", uint64(math.MaxUint64), "18446744073709551615"},
		{"float as decimal", float64(1.5), "1.5"},
		{"whole float without exponent", float64(1767323045678), "1767323045678"},
		{"empty string is absent", "", "m"},
		{"boolean is unreadable", false, "m"},
		{"list is unreadable", []any{"a"}, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := readEnvelope(transport.Table{header.Correlation: tt.value}, "k", "m", "")
			if e.CorrelationID != tt.want {
				t.Errorf("correlation from %#v = %q, want %q", tt.value, e.CorrelationID, tt.want)
			}
		})
	}
}

func TestEnvelopeReadWithoutAceMQHeadersUsesDefaults(t *testing.T) {
	e := readEnvelope(nil, "orders.new", "mid-1", "")
	if e.ID != "mid-1" || e.CorrelationID != "mid-1" || e.Type != "orders.new" ||
		e.Version != 1 || e.Attempt != 1 || !e.FirstSeen.IsZero() || e.Origin != "" {
		t.Errorf("bare message read as %+v", e)
	}
	bare := readEnvelope(transport.Table{}, "", "", "")
	if !isUUIDv4(bare.ID) || bare.CorrelationID != bare.ID || bare.Type != "message" {
		t.Errorf("bare message without message-id or key read as %+v", bare)
	}
}

func TestEnvelopeReadIDHeaderWinsOverMessageID(t *testing.T) {
	e := readEnvelope(transport.Table{header.ID: "hdr", header.Type: "t"}, "key", "prop", "")
	if e.ID != "hdr" || e.Type != "t" || e.CorrelationID != "hdr" {
		t.Errorf("read %+v", e)
	}
}

func TestEnvelopeReadFirstSeen(t *testing.T) {
	want := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	for _, v := range []any{int64(1767323045678), float64(1767323045678), "1767323045678", []byte("1767323045678")} {
		if e := readEnvelope(transport.Table{header.FirstSeen: v}, "", "", ""); !e.FirstSeen.Equal(want) || e.FirstSeen.Location() != time.UTC {
			t.Errorf("first-seen from %#v = %v, want %v UTC", v, e.FirstSeen, want)
		}
	}
	for _, v := range []any{"yesterday", int64(0), int64(-5), true} {
		if e := readEnvelope(transport.Table{header.FirstSeen: v}, "", "", ""); !e.FirstSeen.IsZero() {
			t.Errorf("first-seen from %#v = %v, want unknown (zero)", v, e.FirstSeen)
		}
	}
}

func TestEnvelopeReadRouteAndReplyTo(t *testing.T) {
	e := readEnvelope(transport.Table{
		header.Route: "a,b,c", header.RoutePosition: "2", header.RouteID: "rid",
		header.ReplyTo: "hdr-reply",
	}, "", "", "prop-reply")
	if len(e.Route) != 3 || e.Route[2] != "c" || e.RoutePosition != 2 || e.RouteID != "rid" || e.ReplyTo != "hdr-reply" {
		t.Errorf("read %+v", e)
	}
	e = readEnvelope(transport.Table{header.Route: "a", header.RoutePosition: "x"}, "", "", "prop-reply")
	if e.RoutePosition != 0 || e.ReplyTo != "prop-reply" {
		t.Errorf("unreadable position / reply-to property: %+v", e)
	}
}

func TestEnvelopeReadKeepsApplicationAndBrokerHeadersDropsReserved(t *testing.T) {
	xdeath := []any{transport.Table{"count": int64(1), "queue": "q", "reason": "rejected",
		"routing-keys": []any{"q"}, "time": time.Unix(1, 0)}}
	e := readEnvelope(transport.Table{
		header.ID:             "id",
		"x-acemq-replayed-at": "2026-02-03T04:05:06Z", // .NET's name: unknown, dropped
		"x-acemq-":            "bare prefix",
		"x-death":             xdeath,
		"x-tenant":            "acme",
		"acemq-replay-count":  int64(2),
		"X-AceMQ-Upper":       "kept: the prefix test is case-sensitive",
	}, "", "", "")
	h := e.Headers()
	for _, name := range []string{"x-death", "x-tenant", "acemq-replay-count", "X-AceMQ-Upper"} {
		if _, ok := h[name]; !ok {
			t.Errorf("application header %s was dropped", name)
		}
	}
	if len(h) != 4 {
		t.Errorf("application headers = %v, want exactly 4", h)
	}
	if _, ok := e.Header("x-acemq-replayed-at"); ok {
		t.Error("unknown x-acemq-* header stayed visible")
	}
	if e.ID != "id" {
		t.Errorf("id = %q", e.ID)
	}
}

func TestReplayedAtAcceptsEveryFamilyForm(t *testing.T) {
	want := time.Date(2026, 2, 3, 4, 5, 6, 789e6, time.UTC)
	tests := []struct {
		name  string
		value any
		want  time.Time
		ok    bool
	}{
		{"epoch millis int64 (old Java)", int64(1770091506789), want, true},
		{"epoch millis int32 width irrelevant", int32(1000), time.UnixMilli(1000).UTC(), true},
		{"epoch millis float (JSON)", float64(1770091506789), want, true},
		{"epoch millis decimal text", "1770091506789", want, true},
		{"RFC 3339 Z with 3 digits", "2026-02-03T04:05:06.789Z", want, true},
		{"RFC 3339 Z whole seconds (Ruby)", "2026-02-03T04:05:06Z", want.Truncate(time.Second), true},
		{"RFC 3339 Z with 9 digits", "2026-02-03T04:05:06.789000000Z", want, true},
		{"RFC 3339 with +00:00 offset (Python)", "2026-02-03T04:05:06.789000+00:00", want, true},
		{"RFC 3339 with another offset", "2026-02-03T05:05:06.789+01:00", want, true},
		{"bytes RFC 3339", []byte("2026-02-03T04:05:06.789Z"), want, true},
		{"garbage text", "last tuesday", time.Time{}, false},
		{"date only", "2026-02-03", time.Time{}, false},
		{"boolean", true, time.Time{}, false},
		{"empty", "", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := readEnvelope(transport.Table{header.ReplayedAt: tt.value}, "", "", "")
			got, ok := ReplayedAt(e)
			if ok != tt.ok || !got.Equal(tt.want) {
				t.Errorf("ReplayedAt(%#v) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
			if ok && got.Location() != time.UTC {
				t.Errorf("ReplayedAt returned %v, want UTC", got.Location())
			}
		})
	}
	if _, ok := ReplayedAt(NewEnvelope()); ok {
		t.Error("ReplayedAt reported a time for an envelope without the header")
	}
}

func TestReplayCountReadsTolerantlyAndDefaultsToZero(t *testing.T) {
	for _, tt := range []struct {
		value any
		want  int
	}{{int64(2), 2}, {"3", 3}, {float64(4), 4}, {"x", 0}, {int64(-1), 0}, {nil, 0}} {
		e := readEnvelope(transport.Table{header.ReplayCount: tt.value}, "", "", "")
		if got := ReplayCount(e); got != tt.want {
			t.Errorf("ReplayCount(%#v) = %d, want %d", tt.value, got, tt.want)
		}
	}
}

func BenchmarkReadEnvelope(b *testing.B) {
	headers := transport.Table{
		header.ID:          "11111111-2222-3333-4444-555555555555",
		header.Type:        "order.placed",
		header.Version:     int32(3),
		header.Correlation: "corr-1",
		header.Causation:   "cause-1",
		header.Attempt:     int32(1),
		header.FirstSeen:   int64(1767323045678),
		header.Origin:      "orders@host-7",
		"x-tenant":         "acme",
	}
	b.ReportAllocs()
	for b.Loop() {
		e := readEnvelope(headers, "fx.rich", "11111111-2222-3333-4444-555555555555", "")
		if e.Version != 3 {
			b.Fatal("bad read")
		}
	}
}

func TestEnvelopeReadNeverKeepsAnIdTheContractForbidsWriting(t *testing.T) {
	for _, v := range []any{"\xff\xfeid", []byte{0xff, 0xfe}} {
		e := readEnvelope(transport.Table{header.ID: v}, "k", "", "")
		if !isUUIDv4(e.ID) || e.CorrelationID != e.ID {
			t.Errorf("id from %#v read as %q (correlation %q), want a fresh UUID as for an absent id", v, e.ID, e.CorrelationID)
		}
	}
	// A non-UTF-8 message-id property is unreadable too: the id is fresh.
	e := readEnvelope(nil, "k", "\xffmid", "")
	if !isUUIDv4(e.ID) {
		t.Errorf("id from a non-UTF-8 message-id read as %q, want a fresh UUID", e.ID)
	}
	// Rendering (what every set-aside copy writes) then carries UTF-8 only.
	for k, v := range e.render() {
		if s, ok := v.(string); ok && !utf8.ValidString(s) {
			t.Errorf("render wrote %s as non-UTF-8 %q", k, s)
		}
	}
}

// An attempt or version of 2^31 or more arrives as a 64-bit 'l' from the
// other family clients (pika, bunny); contract §1.4 reads any integer
// width up to int64 by value. It was read as 1.
func TestEnvelopeReadsAttemptAndVersionBeyondInt32(t *testing.T) {
	if math.MaxInt == math.MaxInt32 {
		t.Skip("int is 32 bits on this platform: such an attempt cannot be held")
	}
	for _, v := range []any{int64(1) << 31, int64(1) << 40, int64(math.MaxInt64), uint64(math.MaxInt64), "2147483648", float64(1 << 40)} {
		want, _ := readInt(v)
		e := readEnvelope(transport.Table{header.Attempt: v, header.Version: v}, "k", "m", "")
		if int64(e.Attempt) != want || int64(e.Version) != want {
			t.Errorf("attempt/version from %T %v = %d/%d, want %d", v, v, e.Attempt, e.Version, want)
		}
	}
}

// The next attempt after the largest one is not a negative attempt: it
// stays the largest.
func TestNextAttemptDoesNotWrapAround(t *testing.T) {
	e := Envelope{Attempt: math.MaxInt}
	if got := e.nextAttempt().Attempt; got != math.MaxInt {
		t.Fatalf("next attempt after %d = %d", math.MaxInt, got)
	}
}

// A top-level null application header ('V' on the wire) is an application
// header like any other (contract §1.1 "as given"): it stays visible in
// Headers and is rendered again on a hop, as nested nulls already were.
func TestEnvelopeKeepsATopLevelNullApplicationHeader(t *testing.T) {
	e := readEnvelope(transport.Table{
		header.ID: "id",
		"x-null":  nil,
		"x-table": transport.Table{"inner": nil},
	}, "k", "", "")
	h := e.Headers()
	if v, ok := h["x-null"]; !ok || v != nil {
		t.Fatalf("Headers() = %v: the null header x-null is missing", h)
	}
	if v, ok := e.Header("x-null"); !ok || v != nil {
		t.Fatalf("Header(x-null) = %v, %v; want nil, true", v, ok)
	}
	r := e.render()
	if v, ok := r["x-null"]; !ok || v != nil {
		t.Fatalf("rendered %v: the null header x-null is not written again", r)
	}
	if _, ok := e.WithHeaders(h).Header("x-null"); !ok {
		t.Fatal("WithHeaders(e.Headers()) dropped the null header: copying a message's headers loses one")
	}
}
