package protobuf_test

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/protobuf"
	"github.com/acemq-go/acemq/codec/protobuf/internal/codectest"
	"github.com/acemq-go/acemq/codec/protobuf/internal/orderpb"
	"go.uber.org/goleak"
)

// TestMain fails the package when a consumer started by a test outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimsTheProtobufMediaTypes(t *testing.T) {
	c := protobuf.New()
	for ct, want := range map[string]bool{
		"application/x-protobuf": true, "application/protobuf": true, "Application/Vnd.Google.Protobuf; proto=x": true,
		"application/vnd.acme.order+protobuf": true, "": false, "application/json": false, "application/octet-stream": false,
	} {
		if got := c.Claims(ct); got != want {
			t.Errorf("Claims(%q) = %v, want %v", ct, got, want)
		}
	}
}

func sampleOrder() *orderpb.Order {
	o := codectest.SampleOrder()
	m := &orderpb.Order{OrderId: o.ID, Customer: o.Customer, Total: o.Total, Currency: o.Currency, Tags: o.Tags, Note: o.Note,
		Attributes: map[string]string{}}
	for i, l := range o.Lines {
		m.Lines = append(m.Lines, &orderpb.Line{Sku: l.SKU, Quantity: l.Quantity, Price: l.Price})
		m.Attributes["k"+strconv.Itoa(i)] = l.SKU
	}
	return m
}

func TestAGeneratedMessageRoundTripsDeterministically(t *testing.T) {
	c := protobuf.New()
	in := sampleOrder()
	first, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // map entries would come out in random order without Deterministic
		again, err := c.Encode(in)
		if err != nil || !bytes.Equal(again, first) {
			t.Fatalf("encoding the same message twice gave different bytes (%v)", err)
		}
	}
	var out orderpb.Order
	if err := c.Decode("application/protobuf", first, &out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, &out) {
		t.Fatalf("round trip changed the message:\n%v\n%v", in, &out)
	}
}

func TestTheWireBytesAreTheProtobufEncoding(t *testing.T) {
	// Field 1 "o-1", field 3 varint 1250: what every protobuf runtime writes.
	b, err := protobuf.New().Encode(&orderpb.Order{OrderId: "o-1", Total: 1250})
	if err != nil || hex.EncodeToString(b) != "0a036f2d3118e209" {
		t.Fatalf("Encode = %x, %v; want 0a036f2d3118e209", b, err)
	}
}

func TestAMapTravelsAsAStructAndCrossReadsWithJSON(t *testing.T) {
	c := protobuf.New()
	in := map[string]any{"orderId": "o-1", "total": 1250.0, "tags": []any{"a", "b"}, "paid": true, "note": nil}
	b, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	var s structpb.Struct
	if err := proto.Unmarshal(b, &s); err != nil {
		t.Fatalf("the body is not a google.protobuf.Struct: %v", err)
	}
	var out map[string]any
	if err := c.Decode(protobuf.ContentType, b, &out); err != nil {
		t.Fatal(err)
	}
	var viaJSON map[string]any
	if err := acemq.JSON().Decode("", []byte(`{"orderId":"o-1","total":1250,"tags":["a","b"],"paid":true,"note":null}`), &viaJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) || !reflect.DeepEqual(out, viaJSON) {
		t.Fatalf("got %#v\nwant %#v (and JSON's %#v)", out, in, viaJSON)
	}
	var a any
	if err := c.Decode(protobuf.ContentType, b, &a); err != nil || !reflect.DeepEqual(a, any(in)) {
		t.Fatalf("into *any: %#v, %v", a, err)
	}
}

func TestEncodeAndDecodeRefuseWhatTheyCannotHold(t *testing.T) {
	c := protobuf.New()
	if _, err := c.Encode(struct{ A int }{1}); err == nil || !strings.Contains(err.Error(), "send a generated message") {
		t.Errorf("Encode(struct) = %v", err)
	}
	if _, err := c.Encode(map[string]any{"c": make(chan int)}); err == nil {
		t.Error("a map holding a channel was encoded")
	}
	var s string
	if err := c.Decode(protobuf.ContentType, []byte{}, &s); err == nil || !strings.Contains(err.Error(), "neither a generated message") {
		t.Errorf("Decode(*string) = %v", err)
	}
	var o orderpb.Order
	if err := c.Decode(protobuf.ContentType, []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, &o); err == nil ||
		!strings.HasPrefix(err.Error(), `acemq: the protobuf codec cannot decode a body with content type "application/x-protobuf"`) {
		t.Errorf("Decode(truncated) = %v", err)
	}
}

func TestATruncatedBodyIsParkedNamingTheCodecAndContentType(t *testing.T) {
	b, _ := protobuf.New().Encode(map[string]any{"orderId": "o-1"})
	codectest.Parked(t, acemq.Composite(protobuf.New(), acemq.JSON()), "application/vnd.google.protobuf", b[:len(b)-2],
		"the protobuf codec", `"application/vnd.google.protobuf"`)
}

func FuzzDecode(f *testing.F) {
	c := protobuf.New()
	b, _ := c.Encode(sampleOrder())
	s, _ := c.Encode(map[string]any{"a": []any{1.0, "x", map[string]any{"b": true}}})
	for _, seed := range [][]byte{b, s, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {}, {0x08}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var o orderpb.Order
		_ = c.Decode(protobuf.ContentType, body, &o)
		var m any
		_ = c.Decode(protobuf.ContentType, body, &m)
	})
}

func BenchmarkEncode(b *testing.B) {
	c, o := protobuf.New(), sampleOrder()
	o.Attributes = nil // the same fields as the other codecs' 1 KiB order
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c, o := protobuf.New(), sampleOrder()
	o.Attributes = nil
	body, _ := c.Encode(o)
	b.ReportAllocs()
	for b.Loop() {
		var out orderpb.Order
		if err := c.Decode(protobuf.ContentType, body, &out); err != nil {
			b.Fatal(err)
		}
	}
}
