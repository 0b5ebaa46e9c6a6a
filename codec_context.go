package acemq

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ContextDecoder is implemented by a Codec whose reads can wait on
// something outside the process: a claim-check store, a schema registry, a
// key service. The consumer prefers DecodeContext to Decode and gives it a
// context that ends at the consumer's decode deadline (see
// ConsumerConfig.DecodeTimeout) or when the delivery can no longer be settled.
//
// DecodeContext must return once ctx is done, with an error that wraps
// ctx.Err() or is marked Retryable; the consumer then takes the retry path
// instead of parking the message. A codec that never waits has no need to
// implement it. Implementations must be safe for concurrent use.
type ContextDecoder interface {
	DecodeContext(ctx context.Context, contentType string, data []byte, v any) error
}

// DecodeContext decodes data with c, through c's DecodeContext when c is a
// ContextDecoder (so its waits end with ctx) and through Decode otherwise.
// Wrapping codecs (encryption, claim check, Composite) call it on the codec
// they wrap, so a deadline reaches the innermost read.
func DecodeContext(ctx context.Context, c Codec, contentType string, data []byte, v any) error {
	if cd, ok := c.(ContextDecoder); ok {
		return cd.DecodeContext(ctx, contentType, data, v)
	}
	return c.Decode(contentType, data, v)
}

// DecodeContext reads with the first member claiming the content type,
// passing ctx to it when it is a ContextDecoder.
func (c compositeCodec) DecodeContext(ctx context.Context, contentType string, data []byte, v any) error {
	m := c.member(contentType)
	if m == nil {
		return c.Decode(contentType, data, v)
	}
	return DecodeContext(ctx, m, contentType, data, v)
}

// defaultDecodeTimeout is how long a consumer lets a ContextDecoder read
// one body before giving up and retrying the message, unless
// ConsumerConfig.DecodeTimeout says otherwise.
const defaultDecodeTimeout = 30 * time.Second

// decodeDeadline resolves the configured decode deadline.
func (c *consumerConfig) decodeDeadline() time.Duration {
	if c.decodeTimeout == nil {
		return defaultDecodeTimeout
	}
	return *c.decodeTimeout
}

// checkDecodeTimeout refuses a negative decode timeout.
func (c *consumerConfig) checkDecodeTimeout() error {
	if d := c.decodeDeadline(); d < 0 {
		return configErr("ConsumerConfig.DecodeTimeout", "the decode timeout %s is negative; use 0 for no deadline of its own or a positive duration", d)
	}
	return nil
}

// decodeDelivery decodes one delivery's body with the consumer's codec
// under the decode deadline. A failure caused by the deadline or by the
// delivery's context ending is marked Retryable, so the consumer retries
// the message rather than parking a body that was never read.
func decodeDelivery(ctx context.Context, codec Codec, timeout time.Duration, contentType string, body []byte, v any) error {
	if _, ok := codec.(ContextDecoder); !ok {
		return codec.Decode(contentType, body, v)
	}
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		dctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	err := DecodeContext(dctx, codec, contentType, body, v)
	if err == nil || IsRetryable(err) || IsFatal(err) {
		return err
	}
	if dctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if ctx.Err() == nil && timeout > 0 {
			return Retryable(fmt.Errorf("acemq: decoding the body took longer than the decode timeout (%s), so the message will be retried: %w; raise ConsumerConfig.DecodeTimeout if the store or registry is slow but healthy", timeout, err))
		}
		return Retryable(fmt.Errorf("acemq: decoding the body was interrupted because the delivery ended: %w", err))
	}
	return err
}
