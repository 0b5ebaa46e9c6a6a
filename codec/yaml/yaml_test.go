package yaml_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/yaml"
	"github.com/acemq-go/acemq/codec/yaml/internal/codectest"
)

func TestClaimsTheYAMLMediaTypes(t *testing.T) {
	c := yaml.New()
	for ct, want := range map[string]bool{
		"application/yaml": true, "application/x-yaml; charset=utf-8": true, " TEXT/YAML ": true,
		"text/x-yaml": true, "application/vnd.acme.order+yaml": true,
		"": false, "application/json": false, "+yaml": false, "text/plain": false,
	} {
		if got := c.Claims(ct); got != want {
			t.Errorf("Claims(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestOrderRoundTripsAndCrossReadsAsAMap(t *testing.T) {
	c := yaml.New()
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
	var m any
	if err := c.Decode("application/x-yaml", b, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.(map[string]any)["orderId"]; got != in.ID {
		t.Fatalf("orderId read as a map = %v", got)
	}
}

func TestReadsWhatAnotherLibraryWrites(t *testing.T) {
	// The shape PyYAML and SnakeYAML write for a flat order.
	body := []byte("orderId: o-1\ntotal: 1250\ntags:\n- a\n- b\n")
	var m map[string]any
	if err := yaml.New().Decode("application/yaml", body, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"orderId": "o-1", "total": 1250, "tags": []any{"a", "b"}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %#v, want %#v", m, want)
	}
}

const billionLaughs = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestUnsafeDocumentsAreRefusedWithAReason(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"billion laughs": {billionLaughs, "billion laughs"},
		"python object":  {"x: !!python/object/apply:os.system ['rm -rf /']\n", "tag !!python/object/apply:os.system"},
		"custom tag":     {"x: !order {id: 1}\n", "tag !order"},
		"deep nesting":   {strings.Repeat("[", 300) + strings.Repeat("]", 300), "nests deeper"},
		"not yaml":       {"a: [1, 2\n", "the yaml codec"},
	} {
		t.Run(name, func(t *testing.T) {
			var v any
			err := yaml.New().Decode("application/yaml", []byte(tc.body), &v)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "acemq: the yaml codec cannot decode a body with content type \"application/yaml\"") {
				t.Fatalf("Decode = %v; want an error naming the codec, the content type and %q", err, tc.want)
			}
		})
	}
}

func TestAnAliasUsedModeratelyStillLoads(t *testing.T) {
	var v map[string]any
	body := "base: &b {currency: GBP}\nfirst: *b\nsecond: *b\n"
	if err := yaml.New().Decode("application/yaml", []byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v["second"].(map[string]any)["currency"] != "GBP" {
		t.Fatalf("got %v", v)
	}
}

func TestEncodeRefusesWhatYAMLCannotHoldWithoutPanicking(t *testing.T) {
	if _, err := yaml.New().Encode(make(chan int)); err == nil || !strings.Contains(err.Error(), "acemq: the yaml codec") {
		t.Fatalf("Encode(chan) = %v", err)
	}
}

func TestABillionLaughsMessageIsParkedNamingTheCodecAndContentType(t *testing.T) {
	codectest.Parked(t, acemq.Composite(yaml.New(), acemq.JSON()), "application/x-yaml", []byte(billionLaughs),
		"the yaml codec", `"application/x-yaml"`, "billion laughs")
}

func TestWorksThroughComposite(t *testing.T) {
	c := acemq.Composite(yaml.New(), acemq.JSON())
	b, err := c.Encode(map[string]any{"orderId": "o-9"})
	if err != nil || c.ContentType() != "application/yaml" {
		t.Fatalf("Encode = %q, %v; content type %q", b, err, c.ContentType())
	}
	var fromYAML, fromJSON map[string]any
	if err := c.Decode("text/yaml", b, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode("application/json", []byte(`{"orderId":"o-9"}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Fatalf("yaml %v and json %v differ", fromYAML, fromJSON)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{billionLaughs, "a: 1\n", "- x\n- y\n", "x: !t 1", "&a [*a]", "{a: &b [*b]}", ""} {
		f.Add([]byte(s))
	}
	c := yaml.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		_ = c.Decode("application/yaml", body, &v)
	})
}

func BenchmarkEncode(b *testing.B) {
	c, o := yaml.New(), codectest.SampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c := yaml.New()
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode(yaml.ContentType, body, &o); err != nil {
			b.Fatal(err)
		}
	}
}
