package acemq

import (
	"fmt"
	"strings"
)

// planWarning returns what a plan line should warn about a declaration,
// or "": x-queue-mode on a classic queue (classicQueueModeWarning), or a
// quorum source queue with neither a delivery limit nor
// dead-letter wiring has no broker-side defence against a message no
// consumer can take: one the Go AMQP client cannot even read (headers over
// its limits, published by another client) or one that crashes every
// consumer comes back to the head of the queue for ever. With a delivery
// limit and dead-letter wiring the broker moves it to the dead-letter
// queue on its own after that many deliveries.
func planWarning(d Declaration) string {
	if w := classicQueueModeWarning(d); w != "" {
		return w
	}
	if d.Kind != DeclQueue || d.QueueType != Quorum || d.role != roleNone {
		return ""
	}
	name := d.Queue.Name
	if strings.HasSuffix(name, ".dlq") || strings.HasSuffix(name, ".parked") {
		return ""
	}
	_, limit := d.Queue.Args["x-delivery-limit"]
	_, dlx := d.Queue.Args["x-dead-letter-exchange"]
	if limit || dlx {
		return ""
	}
	return fmt.Sprintf("quorum queue %q has neither a delivery limit nor dead-letter wiring, so a message no consumer can take comes back to it for ever (RabbitMQ 4 drops it after its default 20 deliveries); add Topology.DeadLetters(%q) and, to choose the count, QueueOptions{DeliveryLimit: n}", name, name)
}
