package main

// The measurement behind codec/avro's choice of github.com/hamba/avro/v2
// over github.com/linkedin/goavro/v2. It lives in this module so goavro
// never enters the library's go.mod. Run:
//
//	cd bench && go test -run '^$' -bench Avro -benchmem -count 5

import (
	"testing"

	hamba "github.com/hamba/avro/v2"
	"github.com/linkedin/goavro/v2"
)

// The writer schema of the first case of avro-resolution-fixtures.json.
const fixtureSchema = `{"type":"record","name":"ResolutionOrder","namespace":"org.acemq.amqp.test.avro","fields":[{"name":"orderId","type":"string"},{"name":"total","type":"int"}]}`

type fixtureRecord struct {
	OrderID string `avro:"orderId"`
	Total   int32  `avro:"total"`
}

func BenchmarkAvroHambaEncodeStruct(b *testing.B) {
	s := hamba.MustParse(fixtureSchema)
	v := fixtureRecord{"o-1", 1250}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hamba.Marshal(s, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroHambaDecodeStruct(b *testing.B) {
	s := hamba.MustParse(fixtureSchema)
	body, _ := hamba.Marshal(s, fixtureRecord{"o-1", 1250})
	b.ReportAllocs()
	for b.Loop() {
		var v fixtureRecord
		if err := hamba.Unmarshal(s, body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroHambaEncodeMap(b *testing.B) {
	s := hamba.MustParse(fixtureSchema)
	v := map[string]any{"orderId": "o-1", "total": 1250}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hamba.Marshal(s, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroHambaDecodeMap(b *testing.B) {
	s := hamba.MustParse(fixtureSchema)
	body, _ := hamba.Marshal(s, map[string]any{"orderId": "o-1", "total": 1250})
	b.ReportAllocs()
	for b.Loop() {
		var v map[string]any
		if err := hamba.Unmarshal(s, body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroGoavroEncodeMap(b *testing.B) {
	c, err := goavro.NewCodec(fixtureSchema)
	if err != nil {
		b.Fatal(err)
	}
	v := map[string]any{"orderId": "o-1", "total": 1250}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.BinaryFromNative(nil, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroGoavroDecodeMap(b *testing.B) {
	c, err := goavro.NewCodec(fixtureSchema)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := c.BinaryFromNative(nil, map[string]any{"orderId": "o-1", "total": 1250})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.NativeFromBinary(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBothAvroLibrariesWriteTheFixtureBytes(t *testing.T) {
	// The body of the fixture without its 5-byte registry frame.
	want := []byte{0x06, 'o', '-', '1', 0xc4, 0x13}
	h, err := hamba.Marshal(hamba.MustParse(fixtureSchema), fixtureRecord{"o-1", 1250})
	if err != nil || string(h) != string(want) {
		t.Fatalf("hamba wrote % x, %v", h, err)
	}
	c, _ := goavro.NewCodec(fixtureSchema)
	g, err := c.BinaryFromNative(nil, map[string]any{"orderId": "o-1", "total": 1250})
	if err != nil || string(g) != string(want) {
		t.Fatalf("goavro wrote % x, %v", g, err)
	}
}

// The 1 KiB order of the codec benchmarks (internal/codectest.Order).
const orderSchema = `{"type":"record","name":"Order","namespace":"org.acemq.test","fields":[
{"name":"orderId","type":"string"},{"name":"customer","type":"string"},{"name":"total","type":"long"},
{"name":"currency","type":"string"},
{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
{"name":"sku","type":"string"},{"name":"quantity","type":"int"},{"name":"price","type":"long"}]}}},
{"name":"tags","type":{"type":"array","items":"string"}},{"name":"note","type":"string"}]}`

type orderLine struct {
	SKU      string `avro:"sku"`
	Quantity int32  `avro:"quantity"`
	Price    int64  `avro:"price"`
}

type order struct {
	ID       string      `avro:"orderId"`
	Customer string      `avro:"customer"`
	Total    int64       `avro:"total"`
	Currency string      `avro:"currency"`
	Lines    []orderLine `avro:"lines"`
	Tags     []string    `avro:"tags"`
	Note     string      `avro:"note"`
}

func sampleOrder() (order, map[string]any) {
	o := order{ID: "o-20260101-000042", Customer: "c-7781 Ada Lovelace", Currency: "GBP", Tags: []string{"priority", "gift", "eu"},
		Note: "Leave with the neighbour at number 12 if nobody answers; the side gate is open."}
	var lines []any
	for i := range 15 {
		l := orderLine{SKU: "SKU-0" + string(rune('a'+i)) + "-BLUE-XL", Quantity: int32(i%3 + 1), Price: int64(499 + 100*i)}
		o.Lines = append(o.Lines, l)
		o.Total += int64(l.Quantity) * l.Price
		lines = append(lines, map[string]any{"sku": l.SKU, "quantity": l.Quantity, "price": l.Price})
	}
	return o, map[string]any{"orderId": o.ID, "customer": o.Customer, "total": o.Total, "currency": o.Currency,
		"lines": lines, "tags": []any{"priority", "gift", "eu"}, "note": o.Note}
}

func BenchmarkAvroOrderHambaEncodeStruct(b *testing.B) {
	s := hamba.MustParse(orderSchema)
	o, _ := sampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hamba.Marshal(s, o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroOrderHambaDecodeStruct(b *testing.B) {
	s := hamba.MustParse(orderSchema)
	o, _ := sampleOrder()
	body, _ := hamba.Marshal(s, o)
	b.ReportAllocs()
	for b.Loop() {
		var v order
		if err := hamba.Unmarshal(s, body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroOrderGoavroEncodeMap(b *testing.B) {
	c, _ := goavro.NewCodec(orderSchema)
	_, m := sampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.BinaryFromNative(nil, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAvroOrderGoavroDecodeMap(b *testing.B) {
	c, _ := goavro.NewCodec(orderSchema)
	_, m := sampleOrder()
	body, err := c.BinaryFromNative(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.NativeFromBinary(body); err != nil {
			b.Fatal(err)
		}
	}
}
