package acemq

import (
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// Settlement is the engine's decision for one delivery, reported exactly
// once per delivery to settlement hooks (and the counters that read them)
// after the decision and before it is carried out. Counters follow the
// settlement, never the handler's answer: a retry on the last attempt is
// dead_lettered.
type Settlement struct {
	Queue    string
	Envelope Envelope
	// Outcome is ConsumeAcked, ConsumeRetried, ConsumeRejected,
	// ConsumeDeadLettered, ConsumeParked, ConsumeInProgress or
	// ConsumeReleased.
	Outcome Outcome
	// Target is where the message goes: {q}.dlq, {q}.parked, a rung, or
	// the source queue for a put-back; empty for an ack.
	Target string
	// Reason is the x-acemq-error written on a set-aside copy; for a
	// retry, the handler's error (a retry copy carries no x-acemq-error).
	Reason string
	// RetryDelay is the wait before the next attempt (retried, in_progress).
	RetryDelay time.Duration
	// InBroker is true when the wait is held on a broker rung.
	InBroker bool
	// Handled is false when no handler ran (interceptor refusal, decode
	// failure); HandlerDuration covers interceptors and handler otherwise.
	Handled         bool
	HandlerDuration time.Duration
}

// Fallback reports a hop that could not be made: a set-aside that failed
// (Kind "set_aside_failed", Target the unreachable queue) or a missing
// retry rung (Kind "rung_missing", Target the rung).
type Fallback struct {
	Kind     string
	Queue    string
	Target   string
	Envelope Envelope
	Err      error
}

func (k *consumerCore) report(dv *delivery, s Settlement) {
	dv.end(s)
	if s.Outcome != ConsumeAcked {
		k.env.logger.Info("acemq: settled a message", "queue", s.Queue, "id", idtext.Short(s.Envelope.ID), "outcome", s.Outcome, "target", s.Target, "reason", s.Reason)
	}
	k.host.settled(s)
}

func (k *consumerCore) fallback(f Fallback) {
	k.host.fellBack(f)
}

// settle carries out a decision.
func (k *consumerCore) settle(dv *delivery, env Envelope, dec Decision, handled bool, dur time.Duration) {
	q := k.queue
	switch dec.kind {
	case decAccept:
		k.report(dv, Settlement{Queue: q, Envelope: env, Outcome: ConsumeAcked, Handled: handled, HandlerDuration: dur})
		k.ack(dv)
	case decRetry:
		if IsFatal(dec.err) {
			k.settleAside(dv, env, DeadLetterQueue(q), reasonText("the handler reported an unprocessable message: ", dec.err), ConsumeRejected, handled, dur)
			return
		}
		k.retry(dv, env, dec.err, handled, dur)
	case decReject:
		k.settleAside(dv, env, DeadLetterQueue(q), reasonText("the handler rejected it: ", dec.err), ConsumeRejected, handled, dur)
	case decPark:
		k.settleAside(dv, env, ParkedQueue(q), reasonText("the handler parked it: ", dec.err), ConsumeParked, handled, dur)
	case decInProgress:
		k.report(dv, Settlement{Queue: q, Envelope: env, Outcome: ConsumeInProgress, Target: q, RetryDelay: dec.delay, Handled: handled, HandlerDuration: dur})
		k.putBackLater(dv, env, dec.delay)
	case decRelease:
		k.releaseToBroker(dv, env, handled, dur)
	default:
		k.settleAside(dv, env, DeadLetterQueue(q), "the handler rejected it: the handler returned no decision", ConsumeRejected, handled, dur)
	}
}

// brokerOwned reports headers the broker owns; they are never copied onto
// library hops. x-delivery-count and x-acquired-count (RabbitMQ 4.3)
// describe the delivery they came with; a copy that kept them would show
// them, stale, wherever the broker writes none (a classic queue, a quorum
// queue's first delivery).
func brokerOwned(name string) bool {
	return name == "x-death" || name == "x-delivery-count" || name == "x-acquired-count" ||
		strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}

// hopMessage builds a library hop of the original bytes to queue target on
// the default exchange: same body, content type, id, reply-to and
// application headers (less the broker's), persistent and mandatory. The
// id is always whole in the x-acemq-id header; the message_id property
// carries it only when it fits (messageIDProperty).
func (k *consumerCore) hopMessage(dv *delivery, env Envelope, target string) *transport.Message {
	for name := range env.headers {
		if brokerOwned(name) {
			env = env.WithoutHeader(name)
		}
	}
	// A hop preserves identity, origin included (contract §1.8).
	return &transport.Message{
		Exchange:   "",
		RoutingKey: target,
		Mandatory:  true,
		Properties: transport.Properties{
			ContentType:  dv.d.ContentType,
			MessageID:    messageIDProperty(env.ID),
			ReplyTo:      dv.d.ReplyTo,
			DeliveryMode: 2,
			Priority:     dv.d.Priority,
			Headers:      env.render(),
		},
		Body: dv.d.Body,
	}
}

// settleAside reports the outcome, then sets the message aside into
// target (setAside).
func (k *consumerCore) settleAside(dv *delivery, env Envelope, target, reason string, outcome Outcome, handled bool, dur time.Duration) {
	k.report(dv, Settlement{Queue: k.queue, Envelope: env, Outcome: outcome, Target: target, Reason: reason, Handled: handled, HandlerDuration: dur})
	k.setAside(dv, env, target, reason)
}
