package acemq

import "errors"

// IsNacked reports whether err is (or wraps) a PublishError for a message
// the broker nacked: it reached the broker, which refused to take
// responsibility for it. Patterns that count per-message failures (the
// outbox relay) tell a nack, which is about the message, from a lost
// connection or a timeout, which are not.
func IsNacked(err error) bool {
	var p *PublishError
	return errors.As(err, &p) && p.Reason == reasonNack
}
