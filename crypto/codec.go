package crypto

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq-go/acemq"
)

// ContentType is what an encrypted message carries (contract §2.1); the
// inner codec's content type is not on the wire.
const ContentType = "application/vnd.acemq.encrypted"

// claimChecker is what a claim-check codec answers to (see
// claimcheck.Codec.ClaimCheckThreshold), so NewCodec can refuse to encrypt
// one: the claim check must wrap the encryption, not the other way round.
type claimChecker interface{ ClaimCheckThreshold() int }

// NewCodec returns a codec that encodes with inner, encrypts the bytes
// under ring's current key and writes ContentType; it reads only
// ContentType, decrypting with the key the body names and decoding the
// plaintext with inner (given inner's own content type).
//
// Decode errors are marked acemq.Fatal, so the consumer parks the message
// with a reason naming this codec, the content type and the key id: a
// malformed frame (ErrMalformed), a key id the ring does not hold
// (ErrUnknownKey), a wrong key or altered body (ErrDecrypt). A KeyProvider
// that cannot be reached is acemq.Retryable instead. Reasons never hold a
// key or plaintext.
//
// NewCodec fails when inner or ring is nil, or when inner is a claim-check
// codec: wrap this codec in the claim check instead
// (claimcheck.New(crypto codec, store)), so a store only holds ciphertext.
// The codec is safe for concurrent use when inner is.
func NewCodec(inner acemq.Codec, ring *Keyring) (acemq.Codec, error) {
	switch {
	case inner == nil:
		return nil, errors.New("acemq: crypto.NewCodec needs the codec to encrypt, such as acemq.JSON()")
	case ring == nil:
		return nil, errors.New("acemq: crypto.NewCodec needs a keyring; make one with crypto.NewKeyring")
	}
	if _, ok := inner.(claimChecker); ok {
		return nil, errors.New("acemq: crypto.NewCodec was given a claim-check codec; wrap the other way round, claimcheck.New(crypto.NewCodec(inner, ring), store), so the store holds only ciphertext")
	}
	return &codec{inner: inner, ring: ring}, nil
}

type codec struct {
	inner acemq.Codec
	ring  *Keyring
}

func (c *codec) Name() string        { return "encrypted(" + c.inner.Name() + ")" }
func (c *codec) ContentType() string { return ContentType }

// Claims only application/vnd.acemq.encrypted: an encrypted body is not
// JSON, whatever its plaintext is.
func (c *codec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "", ContentType)
}

func (c *codec) Encode(v any) ([]byte, error) {
	plain, err := c.inner.Encode(v)
	if err != nil {
		return nil, err
	}
	body, err := c.ring.Encrypt(plain)
	if err != nil {
		return nil, fmt.Errorf("acemq: the %s codec cannot encrypt: %w", c.Name(), err)
	}
	return body, nil
}

func (c *codec) Decode(contentType string, data []byte, v any) error {
	return c.DecodeContext(context.Background(), contentType, data, v)
}

// DecodeContext decrypts and decodes; ctx bounds a KeyProvider call and
// reaches the inner codec when it is an acemq.ContextDecoder. A body with
// another content type is refused; one with none is tried, since the frame
// says for itself whether it is encrypted.
func (c *codec) DecodeContext(ctx context.Context, contentType string, data []byte, v any) error {
	if acemq.MediaType(contentType) != "" && !c.Claims(contentType) {
		return acemq.Fatal(fmt.Errorf("acemq: the %s codec reads only content type %s, not %q; give this body to a codec that claims it", c.Name(), ContentType, contentType))
	}
	plain, err := c.ring.Decrypt(ctx, data)
	if err != nil {
		err = fmt.Errorf("acemq: the %s codec cannot read a body with content type %q: %w", c.Name(), contentType, err)
		if acemq.IsRetryable(err) {
			return err
		}
		return acemq.Fatal(err)
	}
	if err := acemq.DecodeContext(ctx, c.inner, c.inner.ContentType(), plain, v); err != nil {
		return fmt.Errorf("acemq: the %s codec decrypted the body, and its inner codec cannot read it: %w", c.Name(), err)
	}
	return nil
}
