// Package avro is the AceMQ Avro codec in the two framings of contract
// §2.1 and §2.5:
//
//   - New(schema): a fixed schema both sides know; the body is bare Avro
//     binary, content type avro/binary (also claims application/avro and
//     type/subtype+avro).
//   - Registered(ctx, registry, subject, schema): the schema is registered
//     and its id travels in the body, 00 + 4-byte big-endian id + Avro
//     binary (Confluent's layout), content type application/vnd.acemq.avro
//     (also claims application/avro and type/subtype+avro). RegistryReader
//     reads such bodies without writing any.
//
// Which framing a body has (contract §2.2): a content type naming a
// framing is believed (avro/binary is bare, application/vnd.acemq.avro is
// framed, and the fixed-schema codec refuses the latter); application/avro
// and type/subtype+avro are read in the codec's own framing; only an
// absent or non-Avro content type lets a leading 0x00 signal registry
// framing. The fixed-schema codec never refuses a body merely for starting
// with 0x00.
//
// Resolution (avro-resolution-fixtures.json): by default a body is read
// with the schema it was written with (the fixtures' writerShape column):
// into a struct by field name, into *any or *map[string]any as the
// writer's record. With ReaderSchema the writer's schema is resolved onto
// the reader's (the resolved column): fields the writer lacks take the
// reader's defaults, fields the reader lacks are skipped.
//
// Registry-framed reads cache schemas by id for the codec's lifetime, so
// a registry outage does not stop consumption of ids already seen. An id
// the registry says it does not hold is fatal (the message is parked); a
// registry that cannot answer, or answers later than LookupTimeout, gives
// a retryable error (acemq.Retryable), so the message is retried instead.
//
// Every body is checked against its schema before it is decoded, with
// lengths compared to the bytes left and at most 1 048 576 array and map
// items, so a short body cannot make the decoder allocate without bound.
//
// It uses github.com/hamba/avro/v2 (chosen by measurement against
// github.com/linkedin/goavro/v2; see docs/codecs.md).
//
// The manual's page on codecs: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package avro

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/avro/internal/codecutil"
	"github.com/acemq-go/acemq/codec/schemas"
)

// Content types.
const (
	// ContentTypeBinary is written by the fixed-schema codec (bare body).
	ContentTypeBinary = "avro/binary"
	// ContentTypeRegistry is written by the registry codec (framed body).
	ContentTypeRegistry = "application/vnd.acemq.avro"
	// Format is the registry format name of Avro schemas.
	Format = "avro"
)

// MaxBytes is the longest string or bytes value a body may hold (16 MiB).
const MaxBytes = 16 << 20

// maxItems bounds the array and map items in one body.
const maxItems = 1 << 20

var api = hamba.Config{
	TagKey:           "avro",
	MaxByteSliceSize: MaxBytes,
	// MaxSliceAllocSize bounds the items of one array.
	MaxSliceAllocSize: maxItems,
}.Freeze()

// Option configures an Avro codec.
type Option func(*options)

type options struct {
	reader        string
	lookupTimeout time.Duration
}

// ReaderSchema makes the codec resolve every body onto schema (the
// fixtures' resolved column): fields the writer lacks take this schema's
// defaults, fields it lacks are skipped. Without it a body is read as it
// was written (the writerShape column).
func ReaderSchema(schema string) Option { return func(o *options) { o.reader = schema } }

// LookupTimeout bounds one registry lookup of a schema id not yet cached
// (default 10s). A lookup that takes longer fails as retryable.
func LookupTimeout(d time.Duration) Option { return func(o *options) { o.lookupTimeout = d } }

func buildOptions(opts []Option) (options, hamba.Schema, error) {
	o := options{lookupTimeout: 10 * time.Second}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.lookupTimeout <= 0 {
		return o, nil, errors.New("acemq: avro.LookupTimeout must be positive")
	}
	if o.reader == "" {
		return o, nil, nil
	}
	rs, err := parse(o.reader)
	if err != nil {
		return o, nil, fmt.Errorf("acemq: the avro reader schema does not parse: %w", err)
	}
	return o, rs, nil
}

// New returns a fixed-schema Avro codec: it writes bare avro/binary
// bodies with schema and reads bare bodies written with it (resolved onto
// ReaderSchema if given). It fails when a schema does not parse or the
// reader schema cannot read the writer's data. Safe for concurrent use.
//
// Encode accepts what hamba/avro marshals for the schema: a struct with
// `avro` tags or a map[string]any for a record. Decode fills a non-nil
// pointer to such a struct, a *map[string]any or an *any.
func New(schema string, opts ...Option) (acemq.Codec, error) {
	ws, err := parse(schema)
	if err != nil {
		return nil, fmt.Errorf("acemq: the avro schema does not parse: %w", err)
	}
	_, rs, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	r, err := readerFor(ws, rs)
	if err != nil {
		return nil, fmt.Errorf("acemq: %w", err)
	}
	return &fixedCodec{writer: ws, read: r}, nil
}

// reading is how one writer schema's bodies are read: the schema to check
// the bytes against and the schema to decode them with (the writer's, or
// the writer's resolved onto the reader's).
type reading struct {
	writer, decode hamba.Schema
}

func readerFor(writer, reader hamba.Schema) (reading, error) {
	if reader == nil {
		return reading{writer: writer, decode: writer}, nil
	}
	resolved, err := hamba.NewSchemaCompatibility().Resolve(reader, writer)
	if err != nil {
		return reading{}, fmt.Errorf("the reader schema cannot read what the writer schema wrote: %w", err)
	}
	return reading{writer: writer, decode: resolved}, nil
}

func (r reading) decodeInto(data []byte, v any) error {
	if err := validate(r.writer, data); err != nil {
		return err
	}
	return api.Unmarshal(r.decode, data, v)
}

type fixedCodec struct {
	writer hamba.Schema
	read   reading
}

func (*fixedCodec) Name() string        { return "avro" }
func (*fixedCodec) ContentType() string { return ContentTypeBinary }

func (*fixedCodec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+avro", ContentTypeBinary, "application/avro")
}

func (c *fixedCodec) Encode(v any) ([]byte, error) {
	b, err := api.Marshal(c.writer, v)
	if err != nil {
		return nil, fmt.Errorf("acemq: the avro codec cannot encode %T with its schema: %w; send a value matching the schema", v, err)
	}
	return b, nil
}

func (c *fixedCodec) Decode(contentType string, data []byte, v any) (err error) {
	if err := codecutil.Target("avro", v); err != nil {
		return err
	}
	if acemq.MediaType(contentType) == ContentTypeRegistry {
		return acemq.Fatal(fmt.Errorf("acemq: the avro codec (fixed schema) cannot decode a body with %s: that content type says the body is registry-framed; read it with avro.Registered or avro.RegistryReader", codecutil.Describe(contentType)))
	}
	defer codecutil.Recover("avro", "decode a body with "+codecutil.Describe(contentType), &err)
	if err := c.read.decodeInto(data, v); err != nil {
		return codecutil.DecodeError("avro", contentType, v, err)
	}
	return nil
}

// registryCodec writes and reads registry-framed bodies.
type registryCodec struct {
	reg     schemas.Registry
	writeID uint32
	writer  hamba.Schema // nil for a RegistryReader
	own     reading      // how bare bodies written with writer are read
	reader  hamba.Schema // nil: read as written
	timeout time.Duration
	mu      sync.RWMutex
	cache   map[uint32]reading
}

// Registered returns a registry-framed Avro codec for subject. It
// registers schema first, returning the existing id if the subject
// already holds these bytes (at any version). A new definition is first
// checked to read data written with the subject's latest version
// (Backward); Registered fails when it cannot, or when the registry
// cannot be reached. Safe for concurrent use.
//
// Encode writes 00 + the id + the Avro body. Decode reads framed bodies
// written with any schema in the registry (see the package comment for
// the framing rules, the cache and which failures are retryable).
func Registered(ctx context.Context, reg schemas.Registry, subject, schema string, opts ...Option) (acemq.Codec, error) {
	if reg == nil {
		return nil, errors.New("acemq: avro.Registered needs a schema registry")
	}
	ws, err := parse(schema)
	if err != nil {
		return nil, fmt.Errorf("acemq: the avro schema for subject %q does not parse: %w", subject, err)
	}
	o, rs, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	// A definition already in the subject keeps its id, whatever came
	// after it (a service still on version 1 restarts after version 2
	// was registered); only a new one is checked against the latest.
	versions, err := reg.Versions(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot read subject %q from the schema registry: %w", subject, err)
	}
	known := false
	for _, v := range versions {
		known = known || v.Fingerprint == schemas.Fingerprint(schema)
	}
	if !known && len(versions) > 0 {
		if err := Backward(versions[len(versions)-1], schema); err != nil {
			return nil, fmt.Errorf("acemq: cannot register a new version of subject %q: %w", subject, err)
		}
	}
	s, err := reg.Register(ctx, subject, Format, schema)
	if err != nil {
		return nil, err
	}
	own, err := readerFor(ws, rs)
	if err != nil {
		return nil, fmt.Errorf("acemq: %w", err)
	}
	c := newRegistryCodec(reg, o, rs)
	c.writeID, c.writer, c.own = s.ID, ws, own
	return c, nil
}

// RegistryReader returns a codec that only reads registry-framed bodies
// (Encode fails). Use it in a consumer that never publishes Avro.
func RegistryReader(reg schemas.Registry, opts ...Option) (acemq.Codec, error) {
	if reg == nil {
		return nil, errors.New("acemq: avro.RegistryReader needs a schema registry")
	}
	o, rs, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newRegistryCodec(reg, o, rs), nil
}

func newRegistryCodec(reg schemas.Registry, o options, rs hamba.Schema) *registryCodec {
	return &registryCodec{reg: reg, reader: rs, timeout: o.lookupTimeout, cache: map[uint32]reading{}}
}

func (*registryCodec) Name() string        { return "avro-registry" }
func (*registryCodec) ContentType() string { return ContentTypeRegistry }

func (*registryCodec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+avro", ContentTypeRegistry, "application/avro")
}

func (c *registryCodec) Encode(v any) ([]byte, error) {
	if c.writer == nil {
		return nil, errors.New("acemq: this avro codec only reads; write with avro.Registered")
	}
	body, err := api.Marshal(c.writer, v)
	if err != nil {
		return nil, fmt.Errorf("acemq: the avro-registry codec cannot encode %T with schema id %d: %w; send a value matching the schema", v, c.writeID, err)
	}
	out := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(out[1:], c.writeID)
	return append(out, body...), nil
}

// framed reports whether data has the registry framing.
func framed(data []byte) bool { return len(data) >= 5 && data[0] == 0 }

func isAvro(mt string) bool {
	return mt == ContentTypeBinary || mt == ContentTypeRegistry || mt == "application/avro" ||
		acemq.MatchesMediaType(mt, "+avro")
}

func (c *registryCodec) Decode(contentType string, data []byte, v any) (err error) {
	if err := codecutil.Target("avro-registry", v); err != nil {
		return err
	}
	defer codecutil.Recover("avro-registry", "decode a body with "+codecutil.Describe(contentType), &err)
	mt := acemq.MediaType(contentType)
	bare := mt == ContentTypeBinary || !isAvro(mt) && !framed(data)
	if bare {
		if c.writer == nil {
			return acemq.Fatal(codecutil.DecodeError("avro-registry", contentType, v,
				errors.New("the body is not registry-framed (00 + 4-byte schema id) and this reader has no schema of its own")))
		}
		if err := c.own.decodeInto(data, v); err != nil {
			return codecutil.DecodeError("avro-registry", contentType, v, err)
		}
		return nil
	}
	if !framed(data) {
		return codecutil.DecodeError("avro-registry", contentType, v,
			fmt.Errorf("the body does not start with the registry framing (00 + 4-byte big-endian schema id); it starts % x", data[:min(len(data), 5)]))
	}
	id := binary.BigEndian.Uint32(data[1:5])
	r, err := c.lookup(id, contentType)
	if err != nil {
		return err
	}
	if err := r.decodeInto(data[5:], v); err != nil {
		return codecutil.DecodeError("avro-registry", contentType, v, fmt.Errorf("schema id %d: %w", id, err))
	}
	return nil
}

// lookup returns how to read bodies written with schema id, from the
// cache or the registry.
func (c *registryCodec) lookup(id uint32, contentType string) (reading, error) {
	c.mu.RLock()
	r, ok := c.cache[id]
	c.mu.RUnlock()
	if ok {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.reg.ByID(ctx, id)
	if errors.Is(err, schemas.ErrNotFound) {
		return reading{}, acemq.Fatal(fmt.Errorf("acemq: the avro-registry codec cannot decode a body with %s: schema id %d is not in the registry (%v); the writer registered it elsewhere, so import it or point the consumer at the writer's registry", codecutil.Describe(contentType), id, err))
	}
	if err != nil {
		return reading{}, acemq.Retryable(fmt.Errorf("acemq: the avro-registry codec cannot decode a body with %s yet: the schema registry did not answer for schema id %d: %w; the message will be retried", codecutil.Describe(contentType), id, err))
	}
	if s.Format != Format {
		return reading{}, acemq.Fatal(fmt.Errorf("acemq: the avro-registry codec cannot decode a body with %s: schema id %d is a %s schema, not avro", codecutil.Describe(contentType), id, s.Format))
	}
	ws, err := parse(s.Definition)
	if err != nil {
		return reading{}, acemq.Fatal(fmt.Errorf("acemq: the avro-registry codec cannot decode a body with %s: schema id %d does not parse: %w", codecutil.Describe(contentType), id, err))
	}
	r, err = readerFor(ws, c.reader)
	if err != nil {
		return reading{}, acemq.Fatal(fmt.Errorf("acemq: the avro-registry codec cannot decode a body with %s: schema id %d: %w", codecutil.Describe(contentType), id, err))
	}
	c.mu.Lock()
	c.cache[id] = r
	c.mu.Unlock()
	return r, nil
}
