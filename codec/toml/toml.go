// Package toml is the AceMQ TOML codec (contract §2.1): it writes
// application/toml and reads application/toml, text/toml and any
// type/subtype+toml. The top level of a TOML document is always a table,
// so only values that marshal to a table (a struct or a map with string
// keys, or a pointer to one) can be encoded.
//
// It uses github.com/pelletier/go-toml/v2: maintained, TOML 1.0, and it
// decodes into map[string]any and structs with `toml` tags.
//
// The manual's page on codecs: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package toml

import (
	"bytes"
	"fmt"
	"reflect"

	gotoml "github.com/pelletier/go-toml/v2"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/toml/internal/codecutil"
)

// ContentType is what the codec writes.
const ContentType = "application/toml"

// New returns the TOML codec. It is safe for concurrent use.
//
// Encode refuses, with an error, a value whose top level is not a table
// (a slice, a string, a number, nil). Decode fills a non-nil pointer to a
// struct, a map or an any (which receives map[string]any); a body that is
// not TOML or does not fit is an error naming the codec and the content
// type, so the consumer parks it with that reason.
func New() acemq.Codec { return codec{} }

type codec struct{}

func (codec) Name() string        { return "toml" }
func (codec) ContentType() string { return ContentType }

func (codec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+toml", "application/toml", "text/toml")
}

func (codec) Encode(v any) (b []byte, err error) {
	if !isTable(v) {
		return nil, fmt.Errorf("acemq: the toml codec cannot encode %T: the top level of a TOML document must be a table; send a struct or a map with string keys, or choose another codec", v)
	}
	defer codecutil.Recover("toml", fmt.Sprintf("encode %T", v), &err)
	var buf bytes.Buffer
	if err := gotoml.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("acemq: the toml codec cannot encode %T: %w; send a value go-toml can marshal or choose another codec", v, err)
	}
	return buf.Bytes(), nil
}

// isTable reports whether v marshals to a TOML table.
func isTable(v any) bool {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Struct:
		return true
	case reflect.Map:
		return rv.Type().Key().Kind() == reflect.String
	}
	return false
}

func (codec) Decode(contentType string, data []byte, v any) (err error) {
	if err := codecutil.Target("toml", v); err != nil {
		return err
	}
	defer codecutil.Recover("toml", "decode a body with "+codecutil.Describe(contentType), &err)
	if err := gotoml.Unmarshal(data, v); err != nil {
		return codecutil.DecodeError("toml", contentType, v, err)
	}
	return nil
}
