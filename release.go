package acemq

import "time"

// decRelease is Release's decision kind; it sits apart from the iota list
// in consume.go so the hook stays in this file.
const decRelease decisionKind = 200

// Release hands the message back to the broker (basic.reject with requeue)
// without handling it, retrying it or setting it aside: the broker
// delivers it again, to this or another consumer, with the same attempt
// number. It exists for handlers that hold a message at the head of an
// ordered queue and must let go of it at shutdown (package ordered's stop
// policy); returned in a loop it spins, so an ordinary handler wants Retry
// or InProgress instead. On a quorum queue each Release raises
// x-delivery-count and counts toward the delivery limit, on every
// RabbitMQ version (4.3 counts a reject, not a nack): past the limit the
// broker dead-letters the message ({q}.dlq with Topology.DeadLetters).
func Release() Decision { return Decision{kind: decRelease} }

// releaseToBroker carries out a Release decision.
func (k *consumerCore) releaseToBroker(dv *delivery, env Envelope, handled bool, dur time.Duration) {
	k.report(dv, Settlement{Queue: k.queue, Envelope: env, Outcome: ConsumeReleased, Target: k.queue, Handled: handled, HandlerDuration: dur})
	k.handBack(dv)
}
