package xml_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/xml"
	"github.com/acemq-go/acemq/internal/codectest"
	"go.uber.org/goleak"
)

// TestMain fails the package when a consumer started by a test outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimsTheXMLMediaTypes(t *testing.T) {
	c := xml.New()
	for ct, want := range map[string]bool{
		"application/xml": true, "text/xml; charset=utf-8": true, "application/vnd.acme.order+xml": true,
		"": false, "application/json": false, "+xml": false, "text/plain": false,
	} {
		if got := c.Claims(ct); got != want {
			t.Errorf("Claims(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestOrderRoundTrips(t *testing.T) {
	c := xml.New()
	in := codectest.SampleOrder()
	b, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	var out codectest.Order
	if err := c.Decode(c.ContentType(), b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the order:\n%+v\n%+v", in, out)
	}
}

type order struct {
	ID    string   `xml:"orderId"`
	Total int      `xml:"total"`
	Tags  []string `xml:"tags"`
	Lines []line   `xml:"lines"`
}

type line struct {
	SKU string `xml:"sku"`
	Qty int    `xml:"qty"`
}

var want = order{ID: "o-1", Total: 1250, Tags: []string{"a", "b"}, Lines: []line{{"s1", 1}, {"s2", 2}}}

// Jackson's XmlMapper (the Java library) wraps each list in an element of
// the property's name; encoding/xml writes repeated siblings.
const (
	javaWrapped = `<Order><orderId>o-1</orderId><total>1250</total><tags><tags>a</tags><tags>b</tags></tags>` +
		`<lines><lines><sku>s1</sku><qty>1</qty></lines><lines><sku>s2</sku><qty>2</qty></lines></lines></Order>`
	wrappedOtherName = `<Order><orderId>o-1</orderId><total>1250</total><tags><tag>a</tag><tag>b</tag></tags>` +
		`<lines><line><sku>s1</sku><qty>1</qty></line><line><sku>s2</sku><qty>2</qty></line></lines></Order>`
	goSiblings = `<order><orderId>o-1</orderId><total>1250</total><tags>a</tags><tags>b</tags>` +
		`<lines><sku>s1</sku><qty>1</qty></lines><lines><sku>s2</sku><qty>2</qty></lines></order>`
)

func TestBothListShapesDecodeIntoAStruct(t *testing.T) {
	for name, body := range map[string]string{"java wrapped": javaWrapped, "wrapper with item names": wrappedOtherName, "go siblings": goSiblings} {
		t.Run(name, func(t *testing.T) {
			var got order
			if err := xml.New().Decode("application/xml", []byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestAOneItemListInAStructIsNotMistakenForAWrapper(t *testing.T) {
	var got order
	body := `<order><lines><sku>s1</sku><qty>1</qty></lines></order>`
	if err := xml.New().Decode("application/xml", []byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Lines) != 1 || got.Lines[0] != (line{"s1", 1}) {
		t.Fatalf("got %+v", got.Lines)
	}
}

func TestBothListShapesDecodeIntoAMapAsText(t *testing.T) {
	wantMap := map[string]any{"orderId": "o-1", "total": "1250", "tags": []any{"a", "b"},
		"lines": []any{map[string]any{"sku": "s1", "qty": "1"}, map[string]any{"sku": "s2", "qty": "2"}}}
	for name, body := range map[string]string{"java wrapped": javaWrapped, "wrapper with item names": wrappedOtherName, "go siblings": goSiblings} {
		t.Run(name, func(t *testing.T) {
			var got map[string]any
			if err := xml.New().Decode("text/xml", []byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, wantMap) {
				t.Fatalf("got %#v\nwant %#v", got, wantMap)
			}
			var anyV any
			if err := xml.New().Decode("text/xml", []byte(body), &anyV); err != nil || !reflect.DeepEqual(anyV, any(wantMap)) {
				t.Fatalf("into *any: %#v, %v", anyV, err)
			}
		})
	}
}

func TestAMapEncodesSortedUnderMessageAndReadsBack(t *testing.T) {
	c := xml.New()
	b, err := c.Encode(map[string]any{"total": 1250, "orderId": "o-1", "tags": []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	const wantXML = `<message><orderId>o-1</orderId><tags>a</tags><tags>b</tags><total>1250</total></message>`
	if string(b) != wantXML {
		t.Fatalf("Encode = %s, want %s", b, wantXML)
	}
	var m map[string]any
	if err := c.Decode(xml.ContentType, b, &m); err != nil || m["total"] != "1250" || !reflect.DeepEqual(m["tags"], []any{"a", "b"}) {
		t.Fatalf("read back %#v, %v", m, err)
	}
	if _, err := c.Encode(map[string]any{"1bad": 1}); err == nil {
		t.Fatal("a key that is no element name was encoded")
	}
	if _, err := c.Encode([]string{"a"}); err == nil || !strings.Contains(err.Error(), "one root element") {
		t.Fatalf("Encode(list) = %v", err)
	}
}

const xxe = `<?xml version="1.0"?><!DOCTYPE order [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><order><orderId>&xxe;</orderId></order>`

const xmlBomb = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><lolz>&lol2;</lolz>`

func TestUnsafeOrMalformedXMLIsRefusedWithAReason(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"external entity":    {xxe, "DTDs and external entities are refused"},
		"entity bomb":        {xmlBomb, "DTDs and external entities are refused"},
		"undeclared entity":  {`<order>&passwd;</order>`, "invalid character entity"},
		"two roots":          {`<a/><b/>`, "more than one root"},
		"truncated":          {`<order><orderId>o-1</orderId>`, "it ends inside element <order>"},
		"empty":              {``, "no element"},
		"deep":               {strings.Repeat("<a>", 300) + strings.Repeat("</a>", 300), "deeper than 256"},
		"mismatched closing": {`<a><b></a></b>`, "closes nothing open"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, target := range []any{new(order), new(any)} {
				err := xml.New().Decode("application/xml", []byte(tc.body), target)
				if err == nil || !strings.Contains(err.Error(), tc.want) ||
					!strings.HasPrefix(err.Error(), `acemq: the xml codec cannot decode a body with content type "application/xml"`) {
					t.Fatalf("Decode into %T = %v; want an error naming the codec, content type and %q", target, err, tc.want)
				}
			}
		})
	}
}

func TestAnXXEMessageIsParkedNamingTheCodecAndContentType(t *testing.T) {
	codectest.Parked(t, acemq.Composite(xml.New(), acemq.JSON()), "text/xml", []byte(xxe),
		"the xml codec", `"text/xml"`, "DTDs and external entities are refused")
}

func TestWorksThroughCompositeAndCrossReadsJSON(t *testing.T) {
	c := acemq.Composite(acemq.JSON(), xml.New())
	var fromXML, fromJSON map[string]any
	if err := c.Decode("application/vnd.acme.order+xml", []byte(`<o><orderId>o-1</orderId></o>`), &fromXML); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode("", []byte(`{"orderId":"o-1"}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromXML, fromJSON) {
		t.Fatalf("xml %v, json %v", fromXML, fromJSON)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{javaWrapped, goSiblings, xxe, xmlBomb, `<a b="c">d<e/></a>`, `<a>&amp;</a>`, `<a`, ``} {
		f.Add([]byte(s))
	}
	c := xml.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		_ = c.Decode("application/xml", body, &v)
		var o order
		_ = c.Decode("application/xml", body, &o)
	})
}

func BenchmarkEncode(b *testing.B) {
	c, o := xml.New(), codectest.SampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c := xml.New()
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode(xml.ContentType, body, &o); err != nil {
			b.Fatal(err)
		}
	}
}
