package acemq

import "time"

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
	maxAge       time.Duration
	jitter       float64
	threshold    time.Duration
	thresholdSet bool
	err          error
}

// DefaultBrokerWaitThreshold is the delay from which waits are held on a
// broker rung rather than in the consumer.
const DefaultBrokerWaitThreshold = 30 * time.Second

// NoRetry is one attempt: a retry decision dead-letters at once.
func NoRetry() RetryPolicy { panic("retry: not implemented yet") }

// Fixed retries up to attempts deliveries in total, waiting delay each time,
// without jitter.
func Fixed(attempts int, delay time.Duration) RetryPolicy { panic("retry: not implemented yet") }

// Exponential retries up to attempts deliveries in total, waiting initial,
// then twice the previous wait, capped at max (max ≤ 0: uncapped), with
// ±20 % jitter on waits held in the consumer.
func Exponential(attempts int, initial, max time.Duration) RetryPolicy {
	panic("retry: not implemented yet")
}

// GiveUpAfter sets the maximum message age (from first-seen); 0 = none.
func (p RetryPolicy) GiveUpAfter(age time.Duration) RetryPolicy { panic("retry: not implemented yet") }

// WithJitter sets the jitter factor, 0 ≤ f < 1.
func (p RetryPolicy) WithJitter(f float64) RetryPolicy { panic("retry: not implemented yet") }

// WaitInBrokerFrom sets the broker-wait threshold; 0 = never wait in the broker.
func (p RetryPolicy) WaitInBrokerFrom(threshold time.Duration) RetryPolicy {
	panic("retry: not implemented yet")
}

// MaxAttempts counts every delivery including the first (≥ 1).
func (p RetryPolicy) MaxAttempts() int { panic("retry: not implemented yet") }

// MaxAge is the age limit; 0 = none.
func (p RetryPolicy) MaxAge() time.Duration { panic("retry: not implemented yet") }

// Schedule is the un-jittered wait before each retry (MaxAttempts-1 entries).
func (p RetryPolicy) Schedule() []time.Duration { panic("retry: not implemented yet") }

// BrokerDelays lists the distinct scheduled delays held on broker rungs,
// ascending.
func (p RetryPolicy) BrokerDelays() []time.Duration { panic("retry: not implemented yet") }

// Threshold is the broker-wait threshold.
func (p RetryPolicy) Threshold() time.Duration { panic("retry: not implemented yet") }

// Jitter is the jitter factor.
func (p RetryPolicy) Jitter() float64 { panic("retry: not implemented yet") }

// Err reports the first invalid value the policy was built with, or a rung
// name collision (contract §8.7).
func (p RetryPolicy) Err() error { panic("retry: not implemented yet") }

// Retries decides whether a failed delivery at attempt with the given age
// retries. ageKnown false counts as young enough.
func (p RetryPolicy) Retries(attempt int, age time.Duration, ageKnown bool) bool {
	panic("retry: not implemented yet")
}

// Delay returns the un-jittered wait after the given failed attempt and
// whether it is held in the broker.
func (p RetryPolicy) Delay(attempt int) (delay time.Duration, inBroker bool) {
	panic("retry: not implemented yet")
}

// ConsumerWait jitters d for an in-consumer wait: d × U[1-f, 1+f], floored
// at 1 ms when f > 0. u is a uniform sample in [0, 1).
func (p RetryPolicy) ConsumerWait(d time.Duration, u float64) time.Duration {
	panic("retry: not implemented yet")
}

// String renders the policy ("exponential(6, 10s, 5m0s)").
func (p RetryPolicy) String() string { panic("retry: not implemented yet") }

// rungCollision names the real rung queue of q in a collision error.
func (p RetryPolicy) rungCollision(q string) error { panic("retry: not implemented yet") }
