package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq"
)

// DefaultThreshold is the encoded size, in bytes, from which a body is
// offloaded to the store (65,536: 64 KiB, contract §2.4).
const DefaultThreshold = 64 << 10

// DefaultPutTimeout bounds one Store.Put made while encoding.
const DefaultPutTimeout = 30 * time.Second

// maxFramedKey bounds the key read from a frame; longer is not a key any
// store writes.
const maxFramedKey = 1024

// The §2.4 framing.
const (
	frameMagic   = 0xAC
	frameVersion = 0x01
	modeInline   = 0x00
	modeOffload  = 0x01
)

// Option configures New.
type Option func(*Codec)

// WithThreshold sets the encoded size, in bytes, from which a body is
// offloaded (default DefaultThreshold). It must be at least 1.
func WithThreshold(n int) Option { return func(c *Codec) { c.threshold = n } }

// WithPutTimeout bounds each Store.Put made while encoding (default
// DefaultPutTimeout): acemq.Codec's Encode has no context, so this is
// what stops a store that does not answer from holding a publisher for
// ever. It must be positive.
func WithPutTimeout(d time.Duration) Option { return func(c *Codec) { c.putTimeout = d } }

// Codec is the claim-check wrapper New returns. It is safe for concurrent
// use when its inner codec and store are.
type Codec struct {
	inner      acemq.Codec
	store      Store
	threshold  int
	putTimeout time.Duration
}

// New returns a codec that frames what inner encodes, offloading bodies
// of the threshold or more to store. It fails when inner or store is nil
// or an option is out of range.
func New(inner acemq.Codec, store Store, opts ...Option) (*Codec, error) {
	c := &Codec{inner: inner, store: store, threshold: DefaultThreshold, putTimeout: DefaultPutTimeout}
	for _, o := range opts {
		o(c)
	}
	switch {
	case inner == nil:
		return nil, errors.New("acemq: claimcheck.New needs the codec to wrap, such as acemq.JSON()")
	case store == nil:
		return nil, errors.New("acemq: claimcheck.New needs a store, such as claimcheck.NewMemoryStore()")
	case c.threshold < 1:
		return nil, &acemq.ConfigurationError{Option: "WithThreshold", Reason: fmt.Sprintf("the threshold %d is below 1 byte", c.threshold)}
	case c.putTimeout <= 0:
		return nil, &acemq.ConfigurationError{Option: "WithPutTimeout", Reason: fmt.Sprintf("the put timeout %s is not positive", c.putTimeout)}
	}
	return c, nil
}

// Name is "claimcheck(" + the inner codec's name + ")".
func (c *Codec) Name() string { return "claimcheck(" + c.inner.Name() + ")" }

// ContentType is the inner codec's: the claim check sets no content type
// of its own.
func (c *Codec) ContentType() string { return c.inner.ContentType() }

// Claims is the inner codec's.
func (c *Codec) Claims(contentType string) bool { return c.inner.Claims(contentType) }

// ClaimCheckThreshold returns the offload threshold in bytes. It also
// tells crypto.NewCodec that this is a claim check, which must wrap the
// encryption rather than be wrapped by it.
func (c *Codec) ClaimCheckThreshold() int { return c.threshold }

// Encode encodes v with the inner codec and frames it: inline below the
// threshold, otherwise put in the store (within the put timeout) and
// framed as its key. A store failure fails the publish with an error
// saying so; nothing is sent.
func (c *Codec) Encode(v any) ([]byte, error) {
	payload, err := c.inner.Encode(v)
	if err != nil {
		return nil, err
	}
	if len(payload) < c.threshold {
		out := make([]byte, 3+len(payload))
		out[0], out[1], out[2] = frameMagic, frameVersion, modeInline
		copy(out[3:], payload)
		return out, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.putTimeout)
	defer cancel()
	key, err := c.store.Put(ctx, payload)
	if err != nil {
		return nil, fmt.Errorf("acemq: the %s codec could not put a %d-byte payload in its store, so nothing was sent: %w", c.Name(), len(payload), err)
	}
	if key == "" || len(key) > maxFramedKey || !utf8.ValidString(key) {
		return nil, fmt.Errorf("acemq: the %s codec's store returned a key that cannot be framed (it must be 1 to %d bytes of UTF-8), so nothing was sent", c.Name(), maxFramedKey)
	}
	out := make([]byte, 3+len(key))
	out[0], out[1], out[2] = frameMagic, frameVersion, modeOffload
	copy(out[3:], key)
	return out, nil
}

// Decode is DecodeContext without a deadline of its own.
func (c *Codec) Decode(contentType string, data []byte, v any) error {
	return c.DecodeContext(context.Background(), contentType, data, v)
}

// DecodeContext reads a framed or unframed body. An offloaded payload is
// read from the store within ctx: a store error or ctx ending is marked
// acemq.Retryable; a key the store does not have (or could never have
// written) is marked acemq.Fatal, so the message is parked with the key
// in the reason. ctx also reaches the inner codec when it is an
// acemq.ContextDecoder.
func (c *Codec) DecodeContext(ctx context.Context, contentType string, data []byte, v any) error {
	payload, key, framed := parse(data)
	if !framed {
		return acemq.DecodeContext(ctx, c.inner, contentType, data, v)
	}
	if key != nil {
		got, err := c.fetch(ctx, contentType, *key)
		if err != nil {
			return err
		}
		payload = got
	}
	return acemq.DecodeContext(ctx, c.inner, contentType, payload, v)
}

// fetch reads an offloaded payload and classifies the failure.
func (c *Codec) fetch(ctx context.Context, contentType, key string) ([]byte, error) {
	prefix := fmt.Sprintf("acemq: the %s codec cannot read a body with content type %s: ", c.Name(), strconv.Quote(contentType))
	if key == "" || len(key) > maxFramedKey || !utf8.ValidString(key) {
		return nil, acemq.Fatal(errors.New(prefix + fmt.Sprintf("its claim-check key is not 1 to %d bytes of UTF-8", maxFramedKey)))
	}
	payload, found, err := c.store.Get(ctx, key)
	switch {
	case errors.Is(err, ErrInvalidKey):
		return nil, acemq.Fatal(fmt.Errorf("%s%w", prefix, err))
	case err != nil:
		return nil, acemq.Retryable(fmt.Errorf("%sthe store could not be read for key %s (%w); the message will be retried", prefix, strconv.Quote(key), err))
	case !found:
		return nil, acemq.Fatal(errors.New(prefix + fmt.Sprintf("the store holds no payload under key %s; it was deleted before every reader was done with it (store retention must outlive every queue, dead-letter queue and replay)", strconv.Quote(key))))
	}
	return payload, nil
}

// parse splits a body: framed reports whether it carries the §2.4 frame;
// for an inline frame payload is the rest, for an offloaded one key is.
func parse(data []byte) (payload []byte, key *string, framed bool) {
	if len(data) < 3 || data[0] != frameMagic || data[1] != frameVersion {
		return nil, nil, false
	}
	switch data[2] {
	case modeInline:
		return data[3:], nil, true
	case modeOffload:
		k := string(data[3:])
		return nil, &k, true
	}
	return nil, nil, false
}

// KeyOf returns the store key of an offloaded body, or false when the body
// is inline or not framed. It reads the frame only.
func KeyOf(body []byte) (string, bool) {
	_, key, framed := parse(body)
	if !framed || key == nil {
		return "", false
	}
	return *key, true
}
