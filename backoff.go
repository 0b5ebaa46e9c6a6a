package acemq

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Back-off waits are jittered so that a fleet of clients that lost the
// broker at the same moment (a restart) does not come back at the same
// moment too.

// backoffDraw, when set, replaces the random draw, in [0, 1), behind each
// jittered wait: jitter, probeWait and spreadWait draw once per wait
// through draw, with the span they spread (the back-off step, probeEvery,
// reconnectSpread). Only tests set it, to see which waits the recovery
// and the re-subscriber took through the jitter and to choose their
// draws; it is atomic because a Conn's goroutines from an earlier test can
// still be drawing when a test sets it.
var backoffDraw atomic.Pointer[func(span time.Duration) float64]

// draw is the random draw for a wait spreading span.
func draw(span time.Duration) float64 {
	if f := backoffDraw.Load(); f != nil {
		return (*f)(span)
	}
	return rand.Float64()
}

// jitter is the wait for a back-off step of d: a random time between d/2
// and d. The connection's recovery and a consumer's re-subscription wait
// this long before each attempt, so no wait is longer than the documented
// interval and a fleet spreads over its second half.
func jitter(d time.Duration) time.Duration { return jitterAt(d, draw(d)) }

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
func probeWait() time.Duration { return probeWaitAt(draw(probeEvery)) }

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
func spreadWait() time.Duration { return spreadWaitAt(draw(reconnectSpread)) }

// spreadWaitAt is spreadWait with the random draw u, in [0, 1), given.
func spreadWaitAt(u float64) time.Duration { return time.Duration(u * float64(reconnectSpread)) }
