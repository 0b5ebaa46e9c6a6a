package acemq

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
func JSON() Codec { panic("codec: not implemented yet") }

// Text returns the text codec: text/plain; charset=utf-8, claims text/*;
// payloads are string or []byte; invalid UTF-8 fails.
func Text() Codec { panic("codec: not implemented yet") }

// Bytes returns the bytes codec: application/octet-stream; claims any
// non-empty content type; payloads are []byte.
func Bytes() Codec { panic("codec: not implemented yet") }

// Composite writes with its first member and reads with the first member
// claiming the content type. List specific codecs before Text and Bytes.
func Composite(codecs ...Codec) Codec { panic("codec: not implemented yet") }

// RegisterCodec adds c to the codec registry under c.Name().
func RegisterCodec(c Codec) { panic("codec: not implemented yet") }

// CodecByName returns a registered codec ("json", "text", "bytes" are
// always there).
func CodecByName(name string) (Codec, bool) { panic("codec: not implemented yet") }
