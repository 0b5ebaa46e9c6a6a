package acemq

import (
	"math/rand/v2"
	"time"
)

// Back-off waits are jittered so that a fleet of clients that lost the
// broker at the same moment (a restart) does not come back at the same
// moment too.

// jitter is the wait for a back-off step of d: a random time between d/2
// and d. The connection's recovery and a consumer's re-subscription wait
// this long before each attempt, so no wait is longer than the documented
// interval and a fleet spreads over its second half.
func jitter(d time.Duration) time.Duration { return jitterAt(d, rand.Float64()) }

// jitterAt is jitter with the random draw u, in [0, 1), given.
func jitterAt(d time.Duration, u float64) time.Duration {
	half := d / 2
	return half + time.Duration(u*float64(d-half))
}

// probeEvery is how often, on average, waitRetry knocks on a port that
// refused us; each knock comes after a random time between half and one
// and a half times it.
const probeEvery = 20 * time.Millisecond

// probeWait is the wait before the next knock on a refused port.
func probeWait() time.Duration { return probeWaitAt(rand.Float64()) }

// probeWaitAt is probeWait with the random draw u, in [0, 1), given.
func probeWaitAt(u float64) time.Duration {
	return probeEvery/2 + time.Duration(u*float64(probeEvery))
}

// reconnectSpread bounds the random wait between a knock that finds the
// broker listening again and the reconnection attempt: without it every
// client knocking on a restarted broker would reconnect within one knock
// of each other. It adds at most this much to the gap after a restart.
const reconnectSpread = 200 * time.Millisecond

// spreadWait is the wait after a knock succeeds.
func spreadWait() time.Duration { return spreadWaitAt(rand.Float64()) }

// spreadWaitAt is spreadWait with the random draw u, in [0, 1), given.
func spreadWaitAt(u float64) time.Duration { return time.Duration(u * float64(reconnectSpread)) }
