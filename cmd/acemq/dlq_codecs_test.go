package main

import (
	"strings"
	"testing"

	"github.com/acemq-go/acemq/codec/protobuf"
)

func TestDLQShowDecodesTheCodecFormats(t *testing.T) {
	pb, err := protobuf.New().Encode(map[string]any{"orderId": "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		want              []string
	}{
		{"xml", "application/xml", []byte(`<order><orderId>o-1</orderId></order>`), []string{"(decoded as xml)", `"orderId": "o-1"`}},
		{"yaml", "application/x-yaml", []byte("orderId: o-1\n"), []string{"(decoded as yaml)", `"orderId": "o-1"`}},
		{"toml", "application/toml", []byte("orderId = \"o-1\"\n"), []string{"(decoded as toml)", `"orderId": "o-1"`}},
		{"protobuf", "application/x-protobuf", pb, []string{"(decoded as protobuf)", `"orderId": "o-1"`}},
		{"avro registry", "application/vnd.acemq.avro", []byte{0, 0, 0, 0, 101, 6, 'o', '-', '1'}, []string{"schema id 101", "4-byte body"}},
		{"bad xml", "text/xml", []byte(`<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>`), []string{"the xml codec cannot decode", "DTDs and external entities are refused", "<!DOCTYPE"}},
		{"json untouched", "application/json", []byte(`{"a":1}`), []string{"{\n  \"a\": 1\n}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeBody(tc.contentType, tc.body)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("decodeBody = %q; want it to contain %q", got, w)
				}
			}
		})
	}
}
