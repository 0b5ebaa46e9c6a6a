package rabbitmq

import (
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// convertError turns the client's errors into the seam's: amqp.ErrClosed
// becomes transport.ErrClosed, and any other *amqp.Error becomes a
// *transport.Error carrying the broker's reply code and text, so errors.As
// reaches them. Other errors pass through unchanged.
func convertError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, amqp.ErrClosed) {
		return transport.ErrClosed
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return fromAMQPError(ae)
	}
	return err
}

// fromAMQPError converts one broker close; nil stays nil.
func fromAMQPError(ae *amqp.Error) error {
	if ae == nil {
		return nil
	}
	if ae == amqp.ErrClosed {
		return transport.ErrClosed
	}
	reason := ae.Reason
	// amqp091-go also reports a failed socket read or write as a
	// client-side 501; only its own parse errors are unreadable frames.
	if !ae.Server && (strings.Contains(ae.Reason, amqp.ErrFrame.Reason) || strings.Contains(ae.Reason, amqp.ErrSyntax.Reason)) {
		reason = unparsableFrame + " (" + reason + ")"
	}
	return &transport.Error{
		Code:       ae.Code,
		Reason:     reason,
		Server:     ae.Server,
		Connection: !ae.Recover,
	}
}

// unparsableFrame names a client-side frame or syntax error (501, 502):
// the client closed the connection because it could not parse what the
// broker sent, which is not a network failure. The frame guard rewrites
// the usual cause, a delivery whose headers are over the client's limits,
// so reaching this means something else the client cannot read.
const unparsableFrame = "the Go AMQP client (amqp091-go) could not parse a frame the broker sent and closed the connection; this is not a network failure: a message on one of its queues is likely unreadable to it (inspect the queues with acemq dlq show, or through the management UI)"
