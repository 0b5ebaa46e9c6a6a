package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/avro"
	"github.com/acemq-go/acemq/codec/protobuf"
	"github.com/acemq-go/acemq/codec/toml"
	"github.com/acemq-go/acemq/codec/xml"
	"github.com/acemq-go/acemq/codec/yaml"
)

// showCodecs are the formats `dlq show` decodes by content type, beyond
// JSON and text: each body is decoded into a generic value and shown as
// indented JSON. Protobuf bodies are read as google.protobuf.Struct (the
// shape map payloads travel in); a generated message of another shape
// does not decode and is shown as bytes.
var showCodecs = []acemq.Codec{xml.New(), yaml.New(), toml.New(), protobuf.New()}

// decodeKnown renders a body in one of the codec/ formats for people. It
// reports false when no such codec claims the content type, so the caller
// falls back to its own rendering; a body the claiming codec cannot read
// is rendered as that codec's error above the raw rendering.
func decodeKnown(contentType string, b []byte, raw func() string) (string, bool) {
	if acemq.MediaType(contentType) == avro.ContentTypeRegistry || acemq.MediaType(contentType) == "application/avro" && len(b) >= 5 && b[0] == 0 {
		if len(b) < 5 || b[0] != 0 {
			return fmt.Sprintf("(not registry-framed Avro: it does not start with 00 and a 4-byte schema id)\n%s", raw()), true
		}
		return fmt.Sprintf("(Avro, registry-framed, schema id %d; the schema is not loaded here, so the %d-byte body is shown as bytes)\n%s",
			binary.BigEndian.Uint32(b[1:5]), len(b)-5, raw()), true
	}
	for _, c := range showCodecs {
		if !c.Claims(contentType) {
			continue
		}
		var v any
		if err := c.Decode(contentType, b, &v); err != nil {
			return fmt.Sprintf("(%v)\n%s", err, raw()), true
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Sprintf("(decoded as %s, but it cannot be shown as JSON: %v)\n%s", c.Name(), err, raw()), true
		}
		return fmt.Sprintf("(decoded as %s)\n%s", c.Name(), out), true
	}
	return "", false
}
