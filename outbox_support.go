package acemq

import (
	"errors"

	"github.com/acemq-go/acemq/transport"
)

// IsNacked reports whether err is (or wraps) a PublishError for a message
// the broker nacked: it reached the broker, which refused to take
// responsibility for it. Patterns that count per-message failures (the
// outbox relay) tell a nack, which is about the message, from a lost
// connection or a timeout, which are not.
func IsNacked(err error) bool {
	var p *PublishError
	return errors.As(err, &p) && p.Nacked
}

// IsMissingExchange reports whether err is (or wraps) a publish the broker
// refused because its exchange does not exist (channel closed with 404
// NOT_FOUND). Like an unroutable return it is about the message's address,
// not the connection: the outbox relay spends an attempt on it.
func IsMissingExchange(err error) bool {
	var t *transport.Error
	return errors.As(err, &t) && t.Code == transport.CodeNotFound && !t.Connection
}
