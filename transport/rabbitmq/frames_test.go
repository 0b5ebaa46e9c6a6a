package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// frame builds one frame from the AMQP 0-9-1 grammar: type, channel,
// size, payload, frame-end.
func frame(typ byte, ch uint16, payload ...[]byte) []byte {
	p := bytes.Join(payload, nil)
	f := []byte{typ}
	f = binary.BigEndian.AppendUint16(f, ch)
	f = binary.BigEndian.AppendUint32(f, uint32(len(p)))
	f = append(f, p...)
	return append(f, 0xCE)
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func short(s string) []byte {
	return append([]byte{byte(len(s))}, s...)
}

func TestAppendPublishWritesTheFramesOfTheGrammar(t *testing.T) {
	msg := &transport.Message{Exchange: "ex", RoutingKey: "rk", Mandatory: true, Body: []byte("hello"),
		Properties: transport.Properties{ContentType: "text/plain", MessageID: "m-1", ReplyTo: "back",
			DeliveryMode: 2, Priority: 3, Headers: transport.Table{"k": "v"}}}
	got, err := appendPublish([]byte("prefix"), 7, 4096, msg)
	if err != nil {
		t.Fatal(err)
	}
	table := bytes.Join([][]byte{short("k"), {'S'}, u32(1), []byte("v")}, nil)
	want := bytes.Join([][]byte{
		[]byte("prefix"),
		frame(1, 7, u16(60), u16(40), u16(0), short("ex"), short("rk"), []byte{1}),
		frame(2, 7, u16(60), u16(0), u64(5),
			u16(0x8000|0x2000|0x1000|0x0800|0x0200|0x0080),
			short("text/plain"), u32(uint32(len(table))), table, []byte{2}, []byte{3}, short("back"), short("m-1")),
		frame(3, 7, []byte("hello")),
	}, nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("frames\n got % x\nwant % x", got, want)
	}

	// No properties, not mandatory, empty body: no flags, no body frame.
	got, err = appendPublish(nil, 1, 4096, &transport.Message{RoutingKey: "q"})
	if err != nil {
		t.Fatal(err)
	}
	want = append(frame(1, 1, u16(60), u16(40), u16(0), short(""), short("q"), []byte{0}),
		frame(2, 1, u16(60), u16(0), u64(0), u16(0))...)
	if !bytes.Equal(got, want) {
		t.Fatalf("frames\n got % x\nwant % x", got, want)
	}
}

func TestAppendPublishSplitsTheBodyAtFrameMaxLessEight(t *testing.T) {
	const frameMax = 24 // 16 body bytes a frame
	for _, size := range []int{0, 1, 15, 16, 17, 32, 48, 49} {
		body := bytes.Repeat([]byte{'b'}, size)
		got, err := appendPublish(nil, 3, frameMax, &transport.Message{Body: body})
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][]byte
		for len(got) > 0 {
			n := int(binary.BigEndian.Uint32(got[3:7]))
			if got[7+n] != 0xCE || binary.BigEndian.Uint16(got[1:3]) != 3 {
				t.Fatalf("size %d: malformed frame % x", size, got[:8+n])
			}
			if got[0] == 3 {
				if n > frameMax-8 {
					t.Fatalf("size %d: a body frame of %d bytes, over frame_max-8", size, n)
				}
				bodies = append(bodies, got[7:7+n])
			}
			got = got[8+n:]
		}
		if wantFrames := (size + 15) / 16; len(bodies) != wantFrames || !bytes.Equal(bytes.Join(bodies, nil), body) {
			t.Fatalf("size %d: %d body frames carrying %d bytes, want %d frames", size, len(bodies), len(bytes.Join(bodies, nil)), wantFrames)
		}
	}
}

// TestAppendFieldGivesEachGoTypeAmqp091sFieldType pins, for every value a
// table may hold, the bytes amqp091-go's writeField writes for it once
// toAMQPTable has converted it: an int past 32 bits and the unsigned types
// become signed values wide enough to hold them (issue 28: amqp091-go cut
// the int, and bunny cannot read 'B', 'u' or 'i').
func TestAppendFieldGivesEachGoTypeAmqp091sFieldType(t *testing.T) {
	when := time.Unix(1700000000, 500)
	cases := []struct {
		name string
		v    any
		want []byte
	}{
		{"bool true", true, []byte{'t', 1}},
		{"bool false", false, []byte{'t', 0}},
		{"byte (uint8, widened to a signed short: bunny cannot read 'B')", byte(200), []byte{'s', 0, 200}},
		{"int8", int8(-2), []byte{'b', 0xFE}},
		{"int16", int16(-2), []byte{'s', 0xFF, 0xFE}},
		{"int (32 bits, as amqp091-go)", int(-2), []byte{'I', 0xFF, 0xFF, 0xFF, 0xFE}},
		{"int past 32 bits (64, where amqp091-go cut it)", int(1) << 40, []byte{'l', 0, 0, 1, 0, 0, 0, 0, 0}},
		{"int32", int32(70000), append([]byte{'I'}, u32(70000)...)},
		{"int64", int64(-3), append([]byte{'l'}, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFD)},
		{"uint16 (widened to a signed long: bunny cannot read 'u')", uint16(65000), append([]byte{'I'}, u32(65000)...)},
		{"uint32 (widened to a signed long long: bunny cannot read 'i')", uint32(4000000000), append([]byte{'l'}, u64(4000000000)...)},
		{"uint (as a signed long long)", uint(7), append([]byte{'l'}, u64(7)...)},
		{"uint64 up to MaxInt64 (as a signed long long)", uint64(math.MaxInt64), append([]byte{'l'}, u64(math.MaxInt64)...)},
		{"float32", float32(1.5), append([]byte{'f'}, u32(math.Float32bits(1.5))...)},
		{"float64", 2.25, append([]byte{'d'}, u64(math.Float64bits(2.25))...)},
		{"decimal", amqp.Decimal{Scale: 2, Value: 12345}, append([]byte{'D', 2}, u32(12345)...)},
		{"string", "héllo", append(append([]byte{'S'}, u32(6)...), "héllo"...)},
		{"bytes", []byte{0, 1, 2}, append(append([]byte{'x'}, u32(3)...), 0, 1, 2)},
		{"nil bytes", []byte(nil), append([]byte{'x'}, u32(0)...)},
		{"time (seconds)", when, append([]byte{'T'}, u64(1700000000)...)},
		{"void", nil, []byte{'V'}},
		{"array", []any{int32(1), "a", []any{true}}, bytes.Join([][]byte{{'A'}, u32(5 + 6 + 7), {'I'}, u32(1), {'S'}, u32(1), []byte("a"), {'A'}, u32(2), {'t', 1}}, nil)},
		{"empty array", []any{}, append([]byte{'A'}, u32(0)...)},
		{"transport.Table", transport.Table{"a": int8(1)}, bytes.Join([][]byte{{'F'}, u32(4), short("a"), {'b', 1}}, nil)},
		{"amqp.Table", amqp.Table{"a": int8(1)}, bytes.Join([][]byte{{'F'}, u32(4), short("a"), {'b', 1}}, nil)},
		{"map[string]any", map[string]any{"a": int8(1)}, bytes.Join([][]byte{{'F'}, u32(4), short("a"), {'b', 1}}, nil)},
		{"nil table", transport.Table(nil), append([]byte{'F'}, u32(0)...)},
		{"table in array", []any{map[string]any{"a": nil}}, bytes.Join([][]byte{{'A'}, u32(1 + 4 + 3), {'F'}, u32(3), short("a"), {'V'}}, nil)},
	}
	for _, c := range cases {
		got, err := appendField(nil, c.v, 0)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: % x, want % x", c.name, got, c.want)
		}
	}
}

func TestAppendPublishRefusesWhatCannotBeEncodedAndWritesNothing(t *testing.T) {
	self := transport.Table{}
	self["me"] = self
	long := strings.Repeat("x", 256)
	cases := []struct {
		name string
		msg  transport.Message
		says string
	}{
		{"uint64 header above MaxInt64", transport.Message{Properties: transport.Properties{Headers: transport.Table{"n": uint64(math.MaxInt64) + 1}}}, "9223372036854775808"},
		{"uint header above MaxInt64 in an array", transport.Message{Properties: transport.Properties{Headers: transport.Table{"a": []any{uint(math.MaxUint64)}}}}, "largest"},
		{"complex number", transport.Message{Properties: transport.Properties{Headers: transport.Table{"c": complex(1, 2)}}}, "complex128"},
		{"struct in a nested table", transport.Message{Properties: transport.Properties{Headers: transport.Table{"t": map[string]any{"s": struct{}{}}}}}, "struct"},
		{"long header name", transport.Message{Properties: transport.Properties{Headers: transport.Table{long: 1}}}, "256 bytes"},
		{"long routing key", transport.Message{RoutingKey: long}, "routing key"},
		{"long exchange", transport.Message{Exchange: long}, "exchange"},
		{"long message id", transport.Message{Properties: transport.Properties{MessageID: long}}, "message id"},
		{"long content type", transport.Message{Properties: transport.Properties{ContentType: long}}, "content type"},
		{"long reply-to", transport.Message{Properties: transport.Properties{ReplyTo: long}}, "reply-to"},
		{"a table holding itself", transport.Message{Properties: transport.Properties{Headers: self}}, "nest deeper"},
	}
	for _, c := range cases {
		got, err := appendPublish([]byte("kept"), 1, 4096, &c.msg)
		if !errors.Is(err, errUnencodable) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want errUnencodable saying %q", c.name, err, c.says)
		}
		if string(got) != "kept" {
			t.Errorf("%s: the buffer became %q, want it as it was", c.name, got)
		}
	}
}

func TestAppendPublishAllocatesNothingIntoAReusedBuffer(t *testing.T) {
	msg := &transport.Message{Exchange: "ex", RoutingKey: "rk", Mandatory: true, Body: make([]byte, 256),
		Properties: transport.Properties{ContentType: "application/json", MessageID: "0190-abcdef", DeliveryMode: 2,
			Headers: transport.Table{"x-attempt": int64(1), "traceparent": "00-abc-def-01", "x-nested": transport.Table{"a": []any{"b", int32(2)}}, "x-at": time.Unix(1, 0)}}}
	buf, err := appendPublish(nil, 1, 131072, msg)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { buf, _ = appendPublish(buf[:0], 1, 131072, msg) }); n != 0 {
		t.Fatalf("%v allocations per encoding, want 0", n)
	}
}
