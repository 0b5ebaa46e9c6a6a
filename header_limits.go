package acemq

import (
	"errors"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// ErrHeaderLimit matches (errors.Is) the *PublishError of a publish refused
// because a header is over header.MaxDepth or header.MaxEntries, holds a
// NaN or infinite float (RabbitMQ cannot decode one and closes the
// publishing connection, taking every publish in flight with it), or holds
// a uint or uint64 above math.MaxInt64 (unsigned values are written as the
// next wider signed type, and no signed type holds one). Nothing was
// written (Sent is false, Outcome "refused"); the Reason names the header
// and the limit. Application publishes (Send, SendAll, including headers an
// interceptor set), hops (retry, dead-letter and park copies) and
// PublishRaw (outbox relay, replay, replies) are all checked, on every
// transport.
var ErrHeaderLimit = errors.New("acemq: a header is over the limits the Go AMQP client can read")

// headerRefusal returns the refusal for a message with a header over the
// limits, or nil.
func headerRefusal(msg *transport.Message) error {
	l, over := wire.CheckHeaders(msg.Headers, asHeaderTable)
	if !over {
		return nil
	}
	reason := l.String() + " that Go consumers (amqp091-go) can read, and one would lose its connection on it; nothing was sent. Flatten the header or carry the data in the body"
	if l.NonFinite {
		reason = l.String() + "; nothing was sent. Send a finite number, or the value as text"
	}
	if l.Unsigned {
		reason = l.String() + "; nothing was sent. Send the value as a string, or as an int64 when it fits"
	}
	return newPubErr(msg, OutcomeRefused, reason, false, ErrHeaderLimit)
}

func asHeaderTable(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case transport.Table:
		return t, true
	case map[string]any:
		return t, true
	}
	return nil, false
}

// appHeaderRefusal is headerRefusal for a table rendered from an envelope
// whose application headers are app: only those can be over the limits
// (the engine's own are strings and integers), so in the common case only
// they are walked; a table over a limit gets headerRefusal's full answer.
func appHeaderRefusal(msg *transport.Message, app map[string]any) error {
	if len(app) == 0 && len(msg.Headers) <= wire.MaxEntries {
		return nil
	}
	if _, over := wire.CheckHeaders(app, asHeaderTable); !over && len(msg.Headers) <= wire.MaxEntries {
		return nil
	}
	return headerRefusal(msg)
}
