package acemq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Consume outcome words (contract §5.2).
const (
	ConsumeAcked        = "acked"
	ConsumeRetried      = "retried"
	ConsumeRejected     = "rejected"
	ConsumeDeadLettered = "dead_lettered"
	ConsumeParked       = "parked"
	ConsumeInProgress   = "in_progress"
)

// Settlement is the engine's decision for one delivery, reported exactly
// once per delivery to settlement hooks (and the counters that read them)
// after the decision and before it is carried out. Counters follow the
// settlement, never the handler's answer: a retry on the last attempt is
// dead_lettered.
type Settlement struct {
	Queue    string
	Envelope Envelope
	// Outcome is acked, retried, rejected, dead_lettered, parked or in_progress.
	Outcome string
	// Target is where the message goes: {q}.dlq, {q}.parked, a rung, or
	// the source queue for a put-back; empty for an ack.
	Target string
	// Reason is the x-acemq-error written on a set-aside copy.
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
		k.env.logger.Info("acemq: settled a message", "queue", s.Queue, "id", s.Envelope.ID, "outcome", s.Outcome, "target", s.Target, "reason", s.Reason)
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

func (k *consumerCore) age(env Envelope) (time.Duration, bool) {
	if env.FirstSeen.IsZero() {
		return 0, false
	}
	return time.Since(env.FirstSeen), true
}

func (k *consumerCore) retry(dv *delivery, env Envelope, cause error, handled bool, dur time.Duration) {
	q := k.queue
	p := k.policy
	age, known := k.age(env)
	if !p.Retries(env.Attempt, age, known) {
		var reason string
		if env.Attempt >= p.MaxAttempts() {
			n := p.MaxAttempts()
			word := "attempts"
			if n == 1 {
				word = "attempt"
			}
			reason = fmt.Sprintf("exhausted %d %s: %s", n, word, errText(cause))
		} else {
			reason = fmt.Sprintf("exceeded the maximum message age of %s: %s", p.MaxAge(), errText(cause))
		}
		k.settleAside(dv, env, DeadLetterQueue(q), reason, ConsumeDeadLettered, handled, dur)
		return
	}
	delay, inBroker := p.Delay(env.Attempt)
	next := env.NextAttempt()
	if next.FirstSeen.IsZero() {
		next.FirstSeen = dv.received.Truncate(time.Millisecond)
	}
	target := q
	if inBroker {
		target = RetryQueue(q, delay)
	}
	k.report(dv, Settlement{Queue: q, Envelope: env, Outcome: ConsumeRetried, Target: target, RetryDelay: delay, InBroker: inBroker, Handled: handled, HandlerDuration: dur})
	if inBroker {
		ctx, cancel := hopContext()
		err := k.host.hop(ctx, k.hopMessage(dv, next, target))
		cancel()
		if err == nil {
			k.ack(dv)
			return
		}
		if IsUnroutable(err) {
			k.fallback(Fallback{Kind: "rung_missing", Queue: q, Target: target, Envelope: env, Err: err})
			k.env.logger.Warn(fmt.Sprintf("acemq: %s is not on the broker, so %s will wait %s in this consumer instead; declare it (start the consumer with its retry policy, or Topology.Retries)", target, env.ID, delay), "queue", q)
		} else {
			k.putBackFailed(dv, env, target, err)
			return
		}
	}
	wait := p.ConsumerWait(delay, rand.Float64())
	k.later(dv, wait, func(ctx context.Context) {
		if err := k.host.hop(ctx, k.hopMessage(dv, next, q)); err != nil {
			k.putBackFailed(dv, env, q, err)
			return
		}
		k.ack(dv)
	})
}

// putBackFailed: the retry was counted; the delivery goes back to the broker.
func (k *consumerCore) putBackFailed(dv *delivery, env Envelope, target string, err error) {
	k.env.logger.Warn("acemq: a retry could not be republished; handing the message back to the broker", "queue", k.queue, "id", env.ID, "target", target, "error", err)
	k.nack(dv, true)
}

func (k *consumerCore) putBackLater(dv *delivery, env Envelope, delay time.Duration) {
	k.later(dv, delay, func(ctx context.Context) {
		if err := k.host.hop(ctx, k.hopMessage(dv, env, k.queue)); err != nil {
			k.putBackFailed(dv, env, k.queue, err)
			return
		}
		k.ack(dv)
	})
}

// later runs fn after d, holding the delivery (and its prefetch slot) but
// not a handler goroutine. A drain cuts the wait short; a lost channel
// abandons it (the broker redelivers). The goroutine belongs to the
// consumer: fn's context (bounded by setAsideBound) ends when the drain
// reaches its deadline, and the drain waits for the goroutine, so no hop is
// made after Close returned while the broker redelivers the original.
func (k *consumerCore) later(dv *delivery, d time.Duration, fn func(ctx context.Context)) {
	if !k.goBackground(func() {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-k.drainCh:
			t.Stop()
		case <-dv.att.ch.Done():
			t.Stop()
			k.release(dv)
			return
		}
		ctx, cancel := context.WithTimeout(k.base, setAsideBound)
		defer cancel()
		fn(ctx)
	}) {
		// The drain is over and its channel released: the broker has the
		// delivery back.
		k.release(dv)
	}
}

func hopContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(context.Background()), setAsideBound)
}

// brokerOwned reports headers the broker owns; they are never copied onto
// library hops.
func brokerOwned(name string) bool {
	return name == "x-death" || name == "x-delivery-count" ||
		strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}

// hopMessage builds a library hop of the original bytes to queue target on
// the default exchange: same body, content type, id, reply-to and
// application headers (less the broker's), persistent and mandatory.
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
			MessageID:    env.ID,
			ReplyTo:      dv.d.ReplyTo,
			DeliveryMode: 2,
			Priority:     dv.d.Priority,
			Headers:      env.render(),
		},
		Body: dv.d.Body,
	}
}

// settleAside reports the outcome, then copies the message into target
// with the reason and acks the original. If the copy cannot be made, the
// documented fallback keeps the message: never unsettled, never dropped.
func (k *consumerCore) settleAside(dv *delivery, env Envelope, target, reason, outcome string, handled bool, dur time.Duration) {
	k.report(dv, Settlement{Queue: k.queue, Envelope: env, Outcome: outcome, Target: target, Reason: reason, Handled: handled, HandlerDuration: dur})
	cp := env
	cp.Error = reason
	ctx, cancel := hopContext()
	err := k.host.hop(ctx, k.hopMessage(dv, cp, target))
	cancel()
	if err == nil {
		k.ack(dv)
		return
	}
	k.fallback(Fallback{Kind: "set_aside_failed", Queue: k.queue, Target: target, Envelope: env, Err: err})
	k.env.logger.Error("acemq: a message could not be set aside", "queue", k.queue, "id", env.ID, "target", target, "error", err)
	switch {
	case !dv.att.alive():
		k.release(dv) // the broker redelivers
	case k.isDraining():
		k.nack(dv, true)
	case k.host.deadLettering(k.queue) && !IsUnroutable(err):
		k.reject(dv) // the broker's own dead-lettering is the last resort
	default:
		k.later(dv, inProgressDelay, func(context.Context) { k.nack(dv, true) })
	}
}
