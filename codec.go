package acemq

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Codec turns payloads into bytes and back, and names its content type.
// Implementations must be safe for concurrent use.
type Codec interface {
	// Name is the registry name ("json", "text", "bytes").
	Name() string
	// ContentType is written on every message this codec encodes.
	ContentType() string
	// Claims reports whether this codec reads the content type (compared
	// as a media type: lower-cased, trimmed, parameters ignored). Only
	// JSON claims an empty content type.
	Claims(contentType string) bool
	Encode(v any) ([]byte, error)
	// Decode reads data into v, which is a non-nil pointer.
	Decode(contentType string, data []byte, v any) error
}

// JSON returns the default codec: application/json; claims text/json,
// *+json and an absent content type.
//
// It encodes with encoding/json. Decode reads into any non-nil pointer
// encoding/json accepts and returns an error (never a panic) for a nil or
// non-pointer target or a body that is not valid JSON for it. Safe for
// concurrent use.
func JSON() Codec { return jsonCodec{} }

// Text returns the text codec: text/plain; charset=utf-8, claims text/*;
// payloads are string or []byte; invalid UTF-8 fails.
//
// Encode accepts string, []byte, *string and *[]byte; Decode fills a
// *string, *[]byte or *any (which receives a string). Safe for concurrent
// use.
func Text() Codec { return textCodec{} }

// Bytes returns the bytes codec: application/octet-stream; claims any
// non-empty content type; payloads are []byte.
//
// Encode accepts []byte and *[]byte; Decode fills a *[]byte or *any (which
// receives a []byte). The bytes are copied both ways, so neither side
// aliases the other. Safe for concurrent use.
func Bytes() Codec { return bytesCodec{} }

// Composite writes with its first member and reads with the first member
// claiming the content type. List specific codecs before Text and Bytes.
//
// Nil members are ignored. Decoding a content type no member claims is an
// error naming the content type and the members. A composite with no
// members fails every Encode and Decode. Safe for concurrent use when its
// members are.
func Composite(codecs ...Codec) Codec {
	members := make([]Codec, 0, len(codecs))
	for _, c := range codecs {
		if c != nil {
			members = append(members, c)
		}
	}
	return compositeCodec{members: members}
}

// codecRegistry is one of the package's two pieces of mutable global state.
var codecRegistry = struct {
	mu     sync.RWMutex
	codecs map[string]Codec
}{codecs: map[string]Codec{}}

// RegisterCodec adds c to the codec registry under c.Name(). It is meant
// to be called from init functions.
//
// It follows database/sql.Register's rule, the one transport.Register
// follows too: a nil codec, an empty name, or a name already registered
// (the built-in "json", "text" and "bytes" included) is a programming
// error, and it panics with a message saying which; two codecs silently
// answering to one name would decode with whichever came last. Safe for
// concurrent use.
func RegisterCodec(c Codec) {
	if c == nil {
		panic("acemq: RegisterCodec was given a nil codec")
	}
	name := c.Name()
	if name == "" {
		panic(fmt.Sprintf("acemq: RegisterCodec was given a codec (%T) with an empty name; a codec needs a name to be found by", c))
	}
	codecRegistry.mu.Lock()
	defer codecRegistry.mu.Unlock()
	_, dup := codecRegistry.codecs[name]
	if dup || name == "json" || name == "text" || name == "bytes" {
		panic(fmt.Sprintf("acemq: RegisterCodec called twice for codec %q; register each name once, and give a replacement codec a name of its own", name))
	}
	codecRegistry.codecs[name] = c
}

// CodecByName returns a registered codec ("json", "text", "bytes" are
// always there). It reports false for a name nothing was registered under.
// Safe for concurrent use.
func CodecByName(name string) (Codec, bool) {
	codecRegistry.mu.RLock()
	c, ok := codecRegistry.codecs[name]
	codecRegistry.mu.RUnlock()
	if ok {
		return c, true
	}
	switch name {
	case "json":
		return JSON(), true
	case "text":
		return Text(), true
	case "bytes":
		return Bytes(), true
	}
	return nil, false
}

// describeContentType names a content type in an error message.
func describeContentType(contentType string) string {
	if strings.TrimSpace(contentType) == "" {
		return "an absent content type"
	}
	return "content type " + strconv.Quote(contentType)
}

// targetError refuses a decode target that is not a non-nil pointer.
func targetError(codec string, v any) error {
	if v == nil {
		return fmt.Errorf("acemq: the %s codec cannot decode into nil; pass a non-nil pointer, such as &payload", codec)
	}
	return fmt.Errorf("acemq: the %s codec cannot decode into %T, which is not a non-nil pointer; pass a pointer, such as &payload", codec, v)
}
