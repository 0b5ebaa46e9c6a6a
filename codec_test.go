package acemq

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestCodecClaimsContentTypes(t *testing.T) {
	tests := []struct {
		contentType       string
		json, text, bytes bool
	}{
		{"", true, false, false},
		{"   ", true, false, false},
		{"application/json", true, false, true},
		{"Application/JSON", true, false, true},
		{" application/json ; charset=utf-8", true, false, true},
		{"text/json", true, true, true},
		{"application/vnd.acme.order+json", true, false, true},
		{"application/problem+JSON; v=1", true, false, true},
		{"application/+json", false, false, true},
		{"+json", false, false, true},
		{"application/jsonx", false, false, true},
		{"text/plain", false, true, true},
		{"text/plain; charset=utf-8", false, true, true},
		{"TEXT/CSV", false, true, true},
		{"text/", false, false, true},
		{"application/octet-stream", false, false, true},
		{"application/xml", false, false, true},
		{"garbage", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			if got := JSON().Claims(tt.contentType); got != tt.json {
				t.Errorf("JSON claims %q = %v, want %v", tt.contentType, got, tt.json)
			}
			if got := Text().Claims(tt.contentType); got != tt.text {
				t.Errorf("Text claims %q = %v, want %v", tt.contentType, got, tt.text)
			}
			if got := Bytes().Claims(tt.contentType); got != tt.bytes {
				t.Errorf("Bytes claims %q = %v, want %v", tt.contentType, got, tt.bytes)
			}
		})
	}
}

func TestCodecContentTypesAndNames(t *testing.T) {
	for _, tt := range []struct {
		c           Codec
		name, ctype string
	}{
		{JSON(), "json", "application/json"},
		{Text(), "text", "text/plain; charset=utf-8"},
		{Bytes(), "bytes", "application/octet-stream"},
	} {
		if tt.c.Name() != tt.name || tt.c.ContentType() != tt.ctype {
			t.Errorf("%s: name %q content type %q", tt.name, tt.c.Name(), tt.c.ContentType())
		}
		if !tt.c.Claims(tt.c.ContentType()) {
			t.Errorf("%s does not claim its own content type", tt.name)
		}
	}
}

func TestCodecRoundTrips(t *testing.T) {
	type order struct {
		ID string `json:"id"`
	}
	b, err := JSON().Encode(order{ID: "o-1"})
	if err != nil || string(b) != `{"id":"o-1"}` {
		t.Fatalf("JSON encode = %s, %v", b, err)
	}
	var o order
	if err := JSON().Decode("", b, &o); err != nil || o.ID != "o-1" {
		t.Errorf("JSON decode = %+v, %v", o, err)
	}

	for _, in := range []any{"héllo", []byte("héllo"), ptr("héllo"), ptr([]byte("héllo"))} {
		b, err := Text().Encode(in)
		if err != nil || string(b) != "héllo" {
			t.Errorf("Text encode %T = %q, %v", in, b, err)
		}
	}
	var s string
	var bs []byte
	var a any
	if err := Text().Decode("text/plain", []byte("hi"), &s); err != nil || s != "hi" {
		t.Errorf("Text decode *string = %q, %v", s, err)
	}
	if err := Text().Decode("text/plain", []byte("hi"), &bs); err != nil || string(bs) != "hi" {
		t.Errorf("Text decode *[]byte = %q, %v", bs, err)
	}
	if err := Text().Decode("text/plain", []byte("hi"), &a); err != nil || a != "hi" {
		t.Errorf("Text decode *any = %#v, %v", a, err)
	}

	src := []byte{0, 1, 0xff}
	b, err = Bytes().Encode(src)
	if err != nil || string(b) != string(src) {
		t.Fatalf("Bytes encode = %v, %v", b, err)
	}
	b[0] = 9
	if src[0] != 0 {
		t.Error("Bytes encode aliases its input")
	}
	bs = nil
	if err := Bytes().Decode("image/png", src, &bs); err != nil || string(bs) != string(src) {
		t.Errorf("Bytes decode = %v, %v", bs, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCodecTextRefusesInvalidUTF8(t *testing.T) {
	bad := []byte{'a', 0xff, 'b'}
	if _, err := Text().Encode(bad); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("encode invalid UTF-8: err = %v", err)
	}
	if _, err := Text().Encode(string(bad)); err == nil {
		t.Error("encode invalid UTF-8 string: no error")
	}
	var s string
	if err := Text().Decode("text/plain", bad, &s); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("decode invalid UTF-8: err = %v", err)
	}
}

func TestCodecDecodeIntoWrongTargetIsAnErrorNotAPanic(t *testing.T) {
	var s string
	var n int
	var nilString *string
	targets := []struct {
		name string
		v    any
	}{{"nil", nil}, {"non-pointer string", s}, {"typed nil pointer", nilString}, {"pointer to int", &n}}
	for _, c := range []Codec{JSON(), Text(), Bytes(), Composite(JSON(), Text(), Bytes())} {
		for _, tt := range targets {
			data, ctype := []byte(`"x"`), c.ContentType()
			if tt.name == "pointer to int" && c.Name() == "json" {
				continue // JSON decodes a number into *int; a string body fails below
			}
			err := c.Decode(ctype, data, tt.v)
			if err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
				t.Errorf("%s decode into %s: err = %v", c.Name(), tt.name, err)
			}
		}
	}
	if err := JSON().Decode("application/json", []byte(`"x"`), &n); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Errorf("JSON decode string into *int: err = %v", err)
	}
}

func TestCodecEncodeOfUnsupportedPayloadIsAnError(t *testing.T) {
	for _, tt := range []struct {
		c Codec
		v any
	}{
		{JSON(), make(chan int)}, {Text(), 42}, {Text(), (*string)(nil)}, {Bytes(), "text"}, {Bytes(), (*[]byte)(nil)},
		{Composite(), []byte("x")},
	} {
		if _, err := tt.c.Encode(tt.v); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("%s encode %T: err = %v", tt.c.Name(), tt.v, err)
		}
	}
}

func TestCodecCompositeWritesWithFirstReadsWithFirstClaiming(t *testing.T) {
	c := Composite(JSON(), nil, Text(), Bytes())
	if c.ContentType() != "application/json" {
		t.Errorf("composite content type = %q", c.ContentType())
	}
	if b, err := c.Encode("hi"); err != nil || string(b) != `"hi"` {
		t.Errorf("composite encode = %s, %v", b, err)
	}
	tests := []struct {
		contentType string
		body        string
		want        any
	}{
		{"", `"j"`, "j"},
		{"text/json", `"j"`, "j"},           // JSON listed before Text claims it first
		{"text/plain", `"t"`, `"t"`},        // text reads the raw body
		{"image/png", "raw", []byte("raw")}, // bytes takes the rest
	}
	for _, tt := range tests {
		var got any
		if err := c.Decode(tt.contentType, []byte(tt.body), &got); err != nil {
			t.Errorf("decode %q: %v", tt.contentType, err)
			continue
		}
		if b, ok := got.([]byte); ok {
			got = b
			if string(b) != string(tt.want.([]byte)) {
				t.Errorf("decode %q = %q, want %q", tt.contentType, b, tt.want)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("decode %q = %#v, want %#v", tt.contentType, got, tt.want)
		}
	}
	// Order matters: Text before JSON takes text/json.
	var s string
	if err := Composite(Text(), JSON()).Decode("text/json", []byte(`"j"`), &s); err != nil || s != `"j"` {
		t.Errorf("Text-first composite on text/json = %q, %v", s, err)
	}
}

func TestCodecCompositeUnclaimedContentTypeNamesItAndTheMembers(t *testing.T) {
	var s string
	err := Composite(JSON(), Text()).Decode("application/xml", []byte("<a/>"), &s)
	if err == nil || !strings.Contains(err.Error(), `"application/xml"`) ||
		!strings.Contains(err.Error(), "json") || !strings.Contains(err.Error(), "text") || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Errorf("err = %v", err)
	}
	if err := Composite(Text()).Decode("", []byte("x"), &s); err == nil || !strings.Contains(err.Error(), "absent content type") {
		t.Errorf("absent content type err = %v", err)
	}
}

type upperCodec struct{ textCodec }

func (upperCodec) Name() string { return "upper" }

func TestCodecRegistryHasBuiltinsAndRegisteredCodecs(t *testing.T) {
	for _, name := range []string{"json", "text", "bytes"} {
		if c, ok := CodecByName(name); !ok || c.Name() != name {
			t.Errorf("CodecByName(%q) = %v, %v", name, c, ok)
		}
	}
	if _, ok := CodecByName("nope"); ok {
		t.Error("CodecByName found an unregistered codec")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			CodecByName("upper")
		}()
	}
	if _, ok := CodecByName("upper"); !ok { // -count=2 runs this twice in one process
		RegisterCodec(upperCodec{})
	}
	wg.Wait()
	if c, ok := CodecByName("upper"); !ok || c.Name() != "upper" {
		t.Errorf("registered codec not found: %v %v", c, ok)
	}
}

// mustPanic runs f and returns the panic message, failing when f returns.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

func TestRegisterCodecPanicsOnADuplicateOrNamelessCodecAsSQLRegisterDoes(t *testing.T) {
	if msg := mustPanic(t, func() { RegisterCodec(JSON()) }); !strings.Contains(msg, `acemq: RegisterCodec called twice for codec "json"`) {
		t.Errorf("duplicate: %s", msg)
	}
	if msg := mustPanic(t, func() { RegisterCodec(nil) }); !strings.Contains(msg, "nil codec") {
		t.Errorf("nil: %s", msg)
	}
	if c, _ := CodecByName("json"); c == nil {
		t.Error("the refused duplicate removed the built-in")
	}
}
