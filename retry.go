package acemq

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
)

// RetryPolicy decides whether a failed delivery is tried again, after how
// long, and whether the wait is held in the consumer or on a broker rung.
// The zero value is NoRetry. Policies are values; modifiers return copies.
// A policy built with invalid values reports them from Err, and a consumer
// or topology given it fails with a ConfigurationError.
type RetryPolicy struct {
	maxAttempts  int
	initial      time.Duration
	max          time.Duration
	exponential  bool
	linear       bool       // Linear: min(initial × (i+1), max)
	waits        RetryWaits // where the waits are held (HoldWaits)
	maxAge       time.Duration
	jitter       float64
	threshold    time.Duration
	thresholdSet bool
	err          error
}

// defaultBrokerWaitThreshold is the delay from which waits are held on a
// broker rung rather than in the consumer.
const defaultBrokerWaitThreshold = 30 * time.Second

// defaultExponentialJitter is the jitter factor Exponential starts with.
const defaultExponentialJitter = 0.2

// NoRetry is one attempt: a retry decision dead-letters at once.
func NoRetry() RetryPolicy { return RetryPolicy{maxAttempts: 1} }

// Fixed retries up to attempts deliveries in total, waiting delay each time,
// without jitter. attempts < 1 or a negative delay make Err non-nil.
func Fixed(attempts int, delay time.Duration) RetryPolicy {
	p := RetryPolicy{maxAttempts: attempts, initial: delay, max: delay}
	switch {
	case attempts < 1:
		p.err = configErr("Fixed(attempts)", "a policy needs at least 1 attempt (the first delivery counts), got %d", attempts)
	case delay < 0:
		p.err = configErr("Fixed(delay)", "the delay cannot be negative, got %v", delay)
	}
	return p
}

// Exponential retries up to attempts deliveries in total, waiting initial,
// then twice the previous wait, capped at max (max ≤ 0: uncapped), with
// ±20 % jitter on waits held in the consumer. attempts < 1 or a negative
// initial delay make Err non-nil.
func Exponential(attempts int, initial, max time.Duration) RetryPolicy {
	p := RetryPolicy{maxAttempts: attempts, initial: initial, max: max, exponential: true, jitter: defaultExponentialJitter}
	switch {
	case attempts < 1:
		p.err = configErr("Exponential(attempts)", "a policy needs at least 1 attempt (the first delivery counts), got %d", attempts)
	case initial < 0:
		p.err = configErr("Exponential(initial)", "the initial delay cannot be negative, got %v", initial)
	}
	return p
}

// GiveUpAfter sets the maximum message age (from first-seen); 0 = none. A
// message whose age reaches the limit is not retried. A negative age makes
// Err non-nil.
func (p RetryPolicy) GiveUpAfter(age time.Duration) RetryPolicy {
	p.maxAge = age
	if age < 0 && p.err == nil {
		p.err = configErr("GiveUpAfter", "the maximum message age cannot be negative, got %v (0 means no limit)", age)
	}
	return p
}

// WithJitter sets the jitter factor, 0 ≤ f < 1. Any other value (NaN
// included) makes Err non-nil.
func (p RetryPolicy) WithJitter(f float64) RetryPolicy {
	p.jitter = f
	if !(f >= 0 && f < 1) && p.err == nil {
		p.err = configErr("WithJitter", "the jitter factor must be at least 0 and below 1, got %v", f)
	}
	return p
}

// WaitInBrokerFrom sets the broker-wait threshold; 0 = never wait in the
// broker. A negative threshold makes Err non-nil.
func (p RetryPolicy) WaitInBrokerFrom(threshold time.Duration) RetryPolicy {
	p.threshold = threshold
	p.thresholdSet = true
	if threshold < 0 && p.err == nil {
		p.err = configErr("WaitInBrokerFrom", "the broker-wait threshold cannot be negative, got %v (0 means never wait in the broker)", threshold)
	}
	return p
}

// attemptLimit counts every delivery including the first (≥ 1; the zero
// policy and invalid counts report 1).
func (p RetryPolicy) attemptLimit() int {
	if p.maxAttempts < 1 {
		return 1
	}
	return p.maxAttempts
}

// ageLimit is the age limit; 0 = none.
func (p RetryPolicy) ageLimit() time.Duration {
	if p.maxAge < 0 {
		return 0
	}
	return p.maxAge
}

// delayAt returns the un-jittered wait before retry i (0-based), without
// allocating the schedule. Doubling saturates instead of overflowing.
func (p RetryPolicy) delayAt(i int) time.Duration {
	if p.initial <= 0 {
		return 0
	}
	if p.linear {
		n := time.Duration(i + 1)
		if p.initial > math.MaxInt64/n {
			return p.max
		}
		return min(p.initial*n, p.max)
	}
	if !p.exponential {
		return p.initial
	}
	d := p.initial
	for ; i > 0; i-- {
		if p.max > 0 && d >= p.max {
			break
		}
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if p.max > 0 && d > p.max {
		d = p.max
	}
	return d
}

// Schedule is the un-jittered wait before each retry (MaxAttempts-1
// entries). It returns a fresh slice the caller may keep.
func (p RetryPolicy) Schedule() []time.Duration {
	n := p.attemptLimit() - 1
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = p.delayAt(i)
	}
	return out
}

// distinctDelays returns the distinct scheduled delays, ascending. The
// schedule never decreases, so once it stops growing the rest repeat.
func (p RetryPolicy) distinctDelays() []time.Duration {
	var out []time.Duration
	n := p.attemptLimit() - 1
	for i := 0; i < n; i++ {
		d := p.delayAt(i)
		if len(out) > 0 && out[len(out)-1] == d {
			break
		}
		out = append(out, d)
	}
	return out
}

// BrokerDelays lists the distinct scheduled delays held on broker rungs,
// ascending. It is empty when the threshold is 0 or every wait is shorter,
// and when the waits are held in the queue (HoldWaits(WaitsInQueue)); with
// WaitsInQueueWhereSupported it lists the rungs used where the broker does
// not hold them.
func (p RetryPolicy) BrokerDelays() []time.Duration {
	if p.waits == WaitsInQueue {
		return nil
	}
	var out []time.Duration
	for _, d := range p.distinctDelays() {
		if p.waitsInBroker(d) {
			out = append(out, d)
		}
	}
	return out
}

// brokerThreshold is the broker-wait threshold (defaultBrokerWaitThreshold unless
// WaitInBrokerFrom set it; 0 = never).
func (p RetryPolicy) brokerThreshold() time.Duration {
	if !p.thresholdSet {
		return defaultBrokerWaitThreshold
	}
	if p.threshold < 0 {
		return 0
	}
	return p.threshold
}

// jitterFactor is the jitter factor.
func (p RetryPolicy) jitterFactor() float64 { return p.jitter }

// Err reports the first invalid value the policy was built with, as a
// *ConfigurationError naming the setting, or a rung name collision
// (contract §8.7). The collision names the queue with the placeholder "{q}",
// since a policy does not know its source queue; nil means the policy can
// be used.
func (p RetryPolicy) Err() error {
	if p.err != nil {
		return p.err
	}
	return p.rungCollision("{q}")
}

// rungCollision reports two broker delays that would share the rung name
// on queue q with different TTLs, or nil.
func (p RetryPolicy) rungCollision(q string) error {
	if p.err != nil {
		return nil
	}
	delays := p.BrokerDelays()
	for i := 1; i < len(delays); i++ {
		if renderDelay(delays[i-1]) == renderDelay(delays[i]) {
			return &rungCollisionError{a: delays[i-1], b: delays[i], queue: RetryQueue(q, delays[i])}
		}
	}
	return nil
}

// rungCollisionError is the contract §8.7 sentence. errors.As also finds a
// *ConfigurationError in it, as for every other unusable policy.
type rungCollisionError struct {
	a, b  time.Duration
	queue string
}

// Error is the contract §8.7 sentence.
func (e *rungCollisionError) Error() string {
	return fmt.Sprintf("acemq: retry delays %v and %v would both wait on queue %s with different TTLs; use delays that are whole seconds", e.a, e.b, e.queue)
}

// As lets errors.As find a *ConfigurationError.
func (e *rungCollisionError) As(target any) bool {
	if c, ok := target.(**ConfigurationError); ok {
		*c = &ConfigurationError{Option: "RetryPolicy", Reason: strings.TrimPrefix(e.Error(), "acemq: ")}
		return true
	}
	return false
}

// retries decides whether a failed delivery at attempt with the given age
// retries. ageKnown false counts as young enough. An age equal to a
// non-zero limit does not retry.
func (p RetryPolicy) retries(attempt int, age time.Duration, ageKnown bool) bool {
	if attempt >= p.attemptLimit() {
		return false
	}
	limit := p.ageLimit()
	return limit == 0 || !ageKnown || age < limit
}

// delayFor returns the un-jittered wait after the given failed attempt and
// whether it is held in the broker. An attempt outside 1..MaxAttempts-1
// returns (0, false).
func (p RetryPolicy) delayFor(attempt int) (delay time.Duration, inBroker bool) {
	if attempt < 1 || attempt > p.attemptLimit()-1 {
		return 0, false
	}
	d := p.delayAt(attempt - 1)
	return d, p.waitsInBroker(d)
}

// waitsInBroker is contract §4.3: threshold > 0 ∧ delay > 0 ∧ delay ≥ threshold.
func (p RetryPolicy) waitsInBroker(d time.Duration) bool {
	t := p.brokerThreshold()
	return t > 0 && d > 0 && d >= t
}

// rungDelayFor returns the broker rung a wait of delay goes to: the
// shortest rung at least as long as delay, or the longest rung when delay
// is beyond all of them (behaviour §3.9). It returns 0 when the policy has
// no rungs.
func (p RetryPolicy) rungDelayFor(delay time.Duration) time.Duration {
	rungs := p.BrokerDelays()
	if len(rungs) == 0 {
		return 0
	}
	for _, r := range rungs {
		if r >= delay {
			return r
		}
	}
	return rungs[len(rungs)-1]
}

// consumerWait jitters d for an in-consumer wait: d × U[1-f, 1+f], floored
// at 1 ms when f > 0. u is a uniform sample in [0, 1) (values outside are
// clamped). With f = 0 it returns d exactly.
func (p RetryPolicy) consumerWait(d time.Duration, u float64) time.Duration {
	f := p.jitter
	if !(f > 0 && f < 1) {
		return d
	}
	if !(u >= 0) {
		u = 0
	} else if u > 1 {
		u = 1
	}
	w := float64(d) * (1 - f + 2*f*u)
	if w > math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	if w < float64(time.Millisecond) {
		return time.Millisecond
	}
	return time.Duration(w)
}

// String renders the policy ("exponential(6, 10s, 5m0s)",
// "linear(5, 10s, 1m0s)"), followed by any modifier that differs from the
// factory's default (".giveUpAfter(2m0s)", ".withJitter(0.1)",
// ".waitInBrokerFrom(1m0s)", ".holdWaits(in the queue)").
func (p RetryPolicy) String() string {
	var b strings.Builder
	switch {
	case p.linear:
		fmt.Fprintf(&b, "linear(%d, %v, %v)", p.maxAttempts, p.initial, p.max)
	case p.exponential:
		fmt.Fprintf(&b, "exponential(%d, %v, %v)", p.maxAttempts, p.initial, p.max)
	case p.maxAttempts > 1 || p.initial != 0:
		fmt.Fprintf(&b, "fixed(%d, %v)", p.maxAttempts, p.initial)
	default:
		b.WriteString("none()")
	}
	if p.maxAge != 0 {
		fmt.Fprintf(&b, ".giveUpAfter(%v)", p.maxAge)
	}
	defJitter := 0.0
	if p.exponential {
		defJitter = defaultExponentialJitter
	}
	if p.jitter != defJitter {
		b.WriteString(".withJitter(" + strconv.FormatFloat(p.jitter, 'g', -1, 64) + ")")
	}
	if p.thresholdSet && p.threshold != defaultBrokerWaitThreshold {
		fmt.Fprintf(&b, ".waitInBrokerFrom(%v)", p.threshold)
	}
	if p.waits != WaitsOnRungs {
		fmt.Fprintf(&b, ".holdWaits(%v)", p.waits)
	}
	return b.String()
}

// The consumer side of a retry: the decision Retry (and InProgress) is
// carried out here, by republishing through the Conn's hop.

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
	if !p.retries(env.Attempt, age, known) {
		var reason string
		if env.Attempt >= p.attemptLimit() {
			n := p.attemptLimit()
			word := "attempts"
			if n == 1 {
				word = "attempt"
			}
			reason = fmt.Sprintf("exhausted %d %s: %s", n, word, errText(cause))
		} else {
			reason = fmt.Sprintf("exceeded the maximum message age of %s: %s", p.ageLimit(), errText(cause))
		}
		k.settleAside(dv, env, DeadLetterQueue(q), reason, ConsumeDeadLettered, handled, dur)
		return
	}
	if k.waitsInQueue {
		k.retryInQueue(dv, env, cause, handled, dur)
		return
	}
	delay, inBroker := p.delayFor(env.Attempt)
	next := env.nextAttempt()
	if next.FirstSeen.IsZero() {
		next.FirstSeen = dv.receivedAt().Truncate(time.Millisecond)
	}
	target := q
	if inBroker {
		target = RetryQueue(q, delay)
	}
	k.report(dv, Settlement{Queue: q, Envelope: env, Outcome: ConsumeRetried, Target: target, Reason: errText(cause), RetryDelay: delay, InBroker: inBroker, Handled: handled, HandlerDuration: dur})
	if inBroker {
		ctx, cancel := hopContext()
		err := k.host.hop(ctx, k.hopMessage(dv, next, target))
		cancel()
		if err == nil {
			k.ack(dv)
			return
		}
		if k.hopNeverWritable(dv, env, "retry copy", err, cause) {
			return
		}
		if IsUnroutable(err) {
			k.fallback(Fallback{Kind: "rung_missing", Queue: q, Target: target, Envelope: env, Err: err})
			k.env.logger.Warn(fmt.Sprintf("acemq: %s is not on the broker, so %s will wait %s in this consumer instead; declare it (start the consumer with its retry policy, or Topology.Retries)", target, idtext.Short(env.ID), delay), "queue", q)
		} else {
			k.putBackFailed(dv, env, target, err)
			return
		}
	}
	wait := p.consumerWait(delay, rand.Float64())
	k.later(dv, wait, func(ctx context.Context) {
		if err := k.host.hop(ctx, k.hopMessage(dv, next, q)); err != nil {
			if !k.hopNeverWritable(dv, env, "retry copy", err, cause) {
				k.putBackFailed(dv, env, q, err)
			}
			return
		}
		k.ack(dv)
	})
}

// putBackFailed: the retry was counted; the delivery goes back to the broker.
func (k *consumerCore) putBackFailed(dv *delivery, env Envelope, target string, err error) {
	k.env.logger.Warn("acemq: a retry could not be republished; handing the message back to the broker", "queue", k.queue, "id", idtext.Short(env.ID), "target", target, "error", err)
	k.handBack(dv)
}

func (k *consumerCore) putBackLater(dv *delivery, env Envelope, delay time.Duration) {
	k.later(dv, delay, func(ctx context.Context) {
		if err := k.host.hop(ctx, k.hopMessage(dv, env, k.queue)); err != nil {
			if !k.hopNeverWritable(dv, env, "put-back copy", err, nil) {
				k.putBackFailed(dv, env, k.queue, err)
			}
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
