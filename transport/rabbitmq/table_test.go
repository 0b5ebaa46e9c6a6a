package rabbitmq

import (
	"math"
	"reflect"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// toAMQPTable hands amqp091-go only values it writes exactly and every
// family client (pika, bunny) reads: an int past 32 bits as an int64
// (amqp091-go writes every int as a 32-bit 'I', cutting the high bits),
// unsigned values as the next wider signed type (amqp091-go writes 'B',
// 'u' and 'i', which bunny cannot read, and refuses uint and uint64), at
// the top level and nested alike. An int that fits stays an int.
func TestToAMQPTableHandsOverSignedValuesEveryClientReads(t *testing.T) {
	in := transport.Table{
		"small":    int(-7),
		"int31":    int(1) << 31,
		"int40":    int(1) << 40,
		"int53":    int(1)<<53 + 1,
		"neg40":    -(int(1) << 40),
		"u8":       uint8(200),
		"u16":      uint16(65000),
		"u32":      uint32(4000000000),
		"u":        uint(9),
		"u64":      uint64(math.MaxInt64),
		"nested":   transport.Table{"int40": int(1) << 40, "u8": uint8(1)},
		"array":    []any{uint16(2), []any{int(1) << 40}},
		"plainmap": map[string]any{"u32": uint32(3)},
		"str":      "s",
	}
	want := amqp.Table{
		"small":    int(-7),
		"int31":    int64(1) << 31,
		"int40":    int64(1) << 40,
		"int53":    int64(1)<<53 + 1,
		"neg40":    -(int64(1) << 40),
		"u8":       int16(200),
		"u16":      int32(65000),
		"u32":      int64(4000000000),
		"u":        int64(9),
		"u64":      int64(math.MaxInt64),
		"nested":   amqp.Table{"int40": int64(1) << 40, "u8": int16(1)},
		"array":    []any{int32(2), []any{int64(1) << 40}},
		"plainmap": amqp.Table{"u32": int64(3)},
		"str":      "s",
	}
	got := toAMQPTable(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("toAMQPTable:\n got %#v\nwant %#v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("amqp091-go refuses the converted table: %v", err)
	}
	if in["int40"] != int(1)<<40 {
		t.Fatal("toAMQPTable changed the caller's table")
	}
}

// A table of values amqp091-go already writes exactly and every client
// reads is handed over as it is, without a copy.
func TestToAMQPTableSharesATableThatNeedsNoChange(t *testing.T) {
	in := transport.Table{"a": int(1), "b": int64(1) << 40, "c": "s", "d": int16(2)}
	got := toAMQPTable(in)
	got["e"] = true
	if _, ok := in["e"]; !ok {
		t.Fatal("a table needing no change was copied")
	}
}
