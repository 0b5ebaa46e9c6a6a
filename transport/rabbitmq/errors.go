package rabbitmq

import (
	"errors"

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
	return &transport.Error{
		Code:       ae.Code,
		Reason:     ae.Reason,
		Server:     ae.Server,
		Connection: !ae.Recover,
	}
}
