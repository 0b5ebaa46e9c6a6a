package acemq

import (
	"fmt"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/internal/wire"
)

// setAsideUnreadable parks a delivery whose headers the Go AMQP client
// could not have read, and reports whether it did. The rabbitmq transport
// rewrites such a delivery before the client parses it (instead of the
// client closing the whole connection, which made the broker redeliver the
// same message to the head of the queue about once a second for ever): the
// readable headers stay, the unreadable ones are kept as their AMQP bytes
// in the acemq-unreadable-headers header, and x-acemq-unreadable says which
// header went over which limit. The handler never sees such a message; it
// goes to {queue}.parked with the reason, where `acemq dlq show` decodes
// the kept headers.
func (k *consumerCore) setAsideUnreadable(dv *delivery, env Envelope) bool {
	limit, ok := dv.d.Headers[wire.UnreadableHeader].(string)
	if !ok {
		return false
	}
	reason := unreadableReason(limit)
	k.env.logger.Warn("acemq: a delivery carries headers the Go AMQP client cannot read; it is parked, and the connection stays up",
		"queue", k.queue, "id", idtext.Short(env.ID), "reason", limit)
	k.settleAside(dv, env, ParkedQueue(k.queue), reason, ConsumeParked, false, 0)
	return true
}

// unreadableReason is the x-acemq-error of a parked unreadable message.
func unreadableReason(limit string) string {
	return fmt.Sprintf("its headers cannot be read by the Go AMQP client (amqp091-go): %s; they are kept as AMQP field-table bytes in the %s header, which acemq dlq show decodes", limit, wire.KeptHeader)
}
