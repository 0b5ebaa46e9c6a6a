package acemq

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Content types the built-in codecs write.
const (
	contentTypeJSON  = "application/json"
	contentTypeText  = "text/plain; charset=utf-8"
	contentTypeBytes = "application/octet-stream"
)

type jsonCodec struct{}

func (jsonCodec) Name() string        { return "json" }
func (jsonCodec) ContentType() string { return contentTypeJSON }

func (jsonCodec) Claims(contentType string) bool {
	return MediaType(contentType) == "" || MatchesMediaType(contentType, "+json", "application/json", "text/json")
}

func (jsonCodec) Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("acemq: the json codec cannot encode %T: %w; send a value encoding/json can marshal or choose another codec", v, err)
	}
	return b, nil
}

func (jsonCodec) Decode(contentType string, data []byte, v any) error {
	if !isNonNilPointer(v) {
		return targetError("json", v)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("acemq: the json codec cannot decode a body with %s into %T: %w; check what the publisher sent or decode into a matching type", describeContentType(contentType), v, err)
	}
	return nil
}

type textCodec struct{}

func (textCodec) Name() string        { return "text" }
func (textCodec) ContentType() string { return contentTypeText }

func (textCodec) Claims(contentType string) bool {
	typ, sub, ok := strings.Cut(MediaType(contentType), "/")
	return ok && typ == "text" && sub != ""
}

func (textCodec) Encode(v any) ([]byte, error) {
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	case []byte:
		b = append([]byte(nil), x...)
	case *string:
		if x == nil {
			return nil, fmt.Errorf("acemq: the text codec cannot encode a nil *string; send a string or []byte")
		}
		b = []byte(*x)
	case *[]byte:
		if x == nil {
			return nil, fmt.Errorf("acemq: the text codec cannot encode a nil *[]byte; send a string or []byte")
		}
		b = append([]byte(nil), (*x)...)
	default:
		return nil, fmt.Errorf("acemq: the text codec cannot encode %T; send a string or []byte, or choose the json codec", v)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("acemq: the text codec cannot encode invalid UTF-8; send UTF-8 text or choose the bytes codec")
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (textCodec) Decode(contentType string, data []byte, v any) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("acemq: the text codec cannot decode a body with %s: it is not valid UTF-8; read it with the bytes codec", describeContentType(contentType))
	}
	switch x := v.(type) {
	case *string:
		if x != nil {
			*x = string(data)
			return nil
		}
	case *[]byte:
		if x != nil {
			*x = append([]byte{}, data...)
			return nil
		}
	case *any:
		if x != nil {
			*x = string(data)
			return nil
		}
	default:
		if v != nil {
			return fmt.Errorf("acemq: the text codec cannot decode into %T; pass a *string, *[]byte or *any", v)
		}
	}
	return targetError("text", v)
}

type bytesCodec struct{}

func (bytesCodec) Name() string        { return "bytes" }
func (bytesCodec) ContentType() string { return contentTypeBytes }

func (bytesCodec) Claims(contentType string) bool { return MediaType(contentType) != "" }

func (bytesCodec) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return append([]byte{}, x...), nil
	case *[]byte:
		if x != nil {
			return append([]byte{}, (*x)...), nil
		}
		return nil, fmt.Errorf("acemq: the bytes codec cannot encode a nil *[]byte; send a []byte")
	}
	return nil, fmt.Errorf("acemq: the bytes codec cannot encode %T; send a []byte, or choose the text or json codec", v)
}

func (bytesCodec) Decode(contentType string, data []byte, v any) error {
	switch x := v.(type) {
	case *[]byte:
		if x != nil {
			*x = append([]byte{}, data...)
			return nil
		}
	case *any:
		if x != nil {
			*x = append([]byte{}, data...)
			return nil
		}
	default:
		if v != nil {
			return fmt.Errorf("acemq: the bytes codec cannot decode into %T; pass a *[]byte or *any", v)
		}
	}
	return targetError("bytes", v)
}

type compositeCodec struct{ members []Codec }

func (c compositeCodec) Name() string {
	names := make([]string, len(c.members))
	for i, m := range c.members {
		names[i] = m.Name()
	}
	return "composite(" + strings.Join(names, ",") + ")"
}

func (c compositeCodec) ContentType() string {
	if len(c.members) == 0 {
		return ""
	}
	return c.members[0].ContentType()
}

func (c compositeCodec) Claims(contentType string) bool { return c.member(contentType) != nil }

func (c compositeCodec) member(contentType string) Codec {
	for _, m := range c.members {
		if m.Claims(contentType) {
			return m
		}
	}
	return nil
}

func (c compositeCodec) Encode(v any) ([]byte, error) {
	if len(c.members) == 0 {
		return nil, fmt.Errorf("acemq: the composite codec has no members, so it cannot encode; pass at least one codec to Composite")
	}
	return c.members[0].Encode(v)
}

func (c compositeCodec) Decode(contentType string, data []byte, v any) error {
	m := c.member(contentType)
	if m == nil {
		return fmt.Errorf("acemq: no codec in %s reads a body with %s; add a codec that claims it to the composite", c.Name(), describeContentType(contentType))
	}
	return m.Decode(contentType, data, v)
}

// isNonNilPointer reports whether v is a non-nil pointer.
func isNonNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && !rv.IsNil()
}
