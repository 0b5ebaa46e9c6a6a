package toml_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/toml"
	"github.com/acemq-go/acemq/codec/toml/internal/codectest"
	"go.uber.org/goleak"
)

// TestMain fails the package when a consumer started by a test outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimsTheTOMLMediaTypes(t *testing.T) {
	c := toml.New()
	for ct, want := range map[string]bool{
		"application/toml": true, "text/toml; charset=utf-8": true, "application/vnd.acme+toml": true,
		"": false, "application/json": false, "text/plain": false,
	} {
		if got := c.Claims(ct); got != want {
			t.Errorf("Claims(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestOrderRoundTripsAndCrossReadsAsAMap(t *testing.T) {
	c := toml.New()
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
	if err := c.Decode("text/toml", b, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.(map[string]any)["orderId"]; got != in.ID {
		t.Fatalf("orderId read as a map = %v", got)
	}
}

func TestTheTopLevelMustBeATable(t *testing.T) {
	for _, v := range []any{[]string{"a"}, "text", 42, nil, (*codectest.Order)(nil), map[int]string{1: "a"}} {
		if _, err := toml.New().Encode(v); err == nil || !strings.Contains(err.Error(), "must be a table") {
			t.Errorf("Encode(%#v) = %v; want the top-level-table refusal", v, err)
		}
	}
	if _, err := toml.New().Encode(&map[string]any{"a": 1}); err != nil {
		t.Errorf("a pointer to a map is a table: %v", err)
	}
}

func TestBadTOMLIsParkedNamingTheCodecAndContentType(t *testing.T) {
	codectest.Parked(t, acemq.Composite(toml.New(), acemq.JSON()), "application/toml", []byte("a = [1, \n"),
		"the toml codec", `"application/toml"`)
}

func TestWorksThroughComposite(t *testing.T) {
	c := acemq.Composite(acemq.JSON(), toml.New())
	var m map[string]any
	if err := c.Decode("application/toml", []byte("orderId = \"o-1\"\ntotal = 1250\n"), &m); err != nil {
		t.Fatal(err)
	}
	if m["orderId"] != "o-1" || m["total"] != int64(1250) {
		t.Fatalf("got %#v", m)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"a = 1\n", "[t]\nx = \"y\"\n", "a = [1,2]\n[[b]]\nc = 1\n", "a = ", ""} {
		f.Add([]byte(s))
	}
	c := toml.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		_ = c.Decode("application/toml", body, &v)
	})
}

func BenchmarkEncode(b *testing.B) {
	c, o := toml.New(), codectest.SampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	c := toml.New()
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode(toml.ContentType, body, &o); err != nil {
			b.Fatal(err)
		}
	}
}
