// Package protobuf is the AceMQ Protocol Buffers codec (contract §2.1): it
// writes application/x-protobuf and reads application/x-protobuf,
// application/protobuf, application/vnd.google.protobuf and any
// type/subtype+protobuf.
//
// Payloads are generated messages (anything implementing proto.Message)
// or, for map-shaped payloads, google.protobuf.Struct: a map[string]any is
// written as a Struct, and a body is read into *map[string]any or *any
// as a Struct. Marshalling is deterministic (map entries in key order), so
// the same message always gives the same bytes.
//
// It uses google.golang.org/protobuf, the official Go runtime.
//
// The manual's page on codecs: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package protobuf

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/protobuf/internal/codecutil"
)

// ContentType is what the codec writes.
const ContentType = "application/x-protobuf"

// New returns the protobuf codec. It is safe for concurrent use.
//
// Encode accepts a proto.Message or a map[string]any (written as
// google.protobuf.Struct) and returns an error for anything else. Decode
// fills a proto.Message (a pointer to a generated message), a
// *map[string]any or an *any (both read the body as a Struct). A body
// that is not protobuf or does not fit is an error naming the codec and
// the content type, so the consumer parks it with that reason.
func New() acemq.Codec { return codec{} }

type codec struct{}

var marshal = proto.MarshalOptions{Deterministic: true}

func (codec) Name() string        { return "protobuf" }
func (codec) ContentType() string { return ContentType }

func (codec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+protobuf",
		"application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf")
}

func (codec) Encode(v any) ([]byte, error) {
	var m proto.Message
	switch x := v.(type) {
	case proto.Message:
		m = x
	case map[string]any:
		s, err := structpb.NewStruct(x)
		if err != nil {
			return nil, fmt.Errorf("acemq: the protobuf codec cannot encode the map as google.protobuf.Struct: %w; use strings, numbers, bools, nil, []any and map[string]any only", err)
		}
		m = s
	default:
		return nil, fmt.Errorf("acemq: the protobuf codec cannot encode %T; send a generated message (a proto.Message) or a map[string]any", v)
	}
	b, err := marshal.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("acemq: the protobuf codec cannot encode %T: %w", v, err)
	}
	return b, nil
}

var errTarget = errors.New("the target is neither a generated message nor *map[string]any nor *any")

func (codec) Decode(contentType string, data []byte, v any) error {
	if err := codecutil.Target("protobuf", v); err != nil {
		return err
	}
	switch x := v.(type) {
	case proto.Message:
		if err := proto.Unmarshal(data, x); err != nil {
			return codecutil.DecodeError("protobuf", contentType, v, err)
		}
		return nil
	case *map[string]any:
		m, err := asMap(data)
		if err != nil {
			return codecutil.DecodeError("protobuf", contentType, v, err)
		}
		*x = m
		return nil
	case *any:
		m, err := asMap(data)
		if err != nil {
			return codecutil.DecodeError("protobuf", contentType, v, err)
		}
		*x = m
		return nil
	}
	return codecutil.DecodeError("protobuf", contentType, v, fmt.Errorf("%w; decode into a pointer to the generated message", errTarget))
}

// asMap reads a google.protobuf.Struct.
func asMap(data []byte) (map[string]any, error) {
	var s structpb.Struct
	if err := proto.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("reading it as google.protobuf.Struct: %w", err)
	}
	return s.AsMap(), nil
}
