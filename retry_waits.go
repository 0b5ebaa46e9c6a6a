package acemq

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// RetryWaits says where a retry policy's waits are held.
//
// WaitsOnRungs (the zero value) is the rung ladder every broker supports: a
// wait shorter than the broker-wait threshold is held in the consumer, a
// longer one in a classic queue per distinct delay ({q}.retry.{delay},
// a TTL that dead-letters back into q), and the retry is a republished copy
// whose x-acemq-attempt header counts the attempts.
//
// WaitsInQueue holds every wait inside the source queue itself, with
// RabbitMQ 4.3's delayed retry: the queue is declared with
// x-delayed-retry-type "failed", x-delayed-retry-min and x-delayed-retry-max
// (RetryPolicy.delayedRetryArguments), the consumer hands a failed delivery
// back with basic.reject (requeue), and the broker keeps it unavailable for
// min(min × delivery count, max) before delivering it again. The message
// never leaves its quorum queue (it is replicated like any other message in
// it, so it survives the loss of a minority of nodes), no copy is written,
// and the attempt the handler sees is the original's x-acemq-attempt plus
// the broker's x-delivery-count: a delivery lost with its channel (a
// consumer that crashed) counts as an attempt too, because the broker
// counts it. It needs a quorum queue, a broker that offers delayed retry
// (RabbitMQ 4.3 or later) and a schedule the broker can hold (Linear,
// Fixed, or an Exponential that does not grow); Validate, Apply and
// Consume refuse it otherwise, saying which. docs/retries-and-dead-letters.md
// compares it with the rungs.
//
// WaitsInQueueWhereSupported is WaitsInQueue where the broker offers it
// and the rungs elsewhere: Conn.Apply declares the queue with the delayed
// retry arguments on RabbitMQ 4.3 and later (and without them, with the
// ladder, on older brokers and memory://, or when the queue already exists
// without them), and the consumer holds its waits in the queue when its
// Conn declared the queue that way. Conn.Plan says which applies.
type RetryWaits int

// Where a retry policy's waits are held.
const (
	WaitsOnRungs RetryWaits = iota
	WaitsInQueue
	WaitsInQueueWhereSupported
)

// String names the choice: "on rungs", "in the queue", "in the queue where
// supported".
func (w RetryWaits) String() string {
	switch w {
	case WaitsOnRungs:
		return "on rungs"
	case WaitsInQueue:
		return "in the queue"
	case WaitsInQueueWhereSupported:
		return "in the queue where supported"
	}
	return "RetryWaits(" + strconv.Itoa(int(w)) + ")"
}

// delayedRetryType is the x-delayed-retry-type the library declares:
// "failed" holds the returns RabbitMQ counts as failed deliveries (a
// basic.reject with requeue, a delivery lost with its channel) and hands
// back at once what a consumer returns unstarted (basic.nack, as a drain
// does), so a shutdown never delays the messages it hands back.
const delayedRetryType = "failed"

// Linear retries up to attempts deliveries in total, waiting step after the
// first failure, twice step after the second, and so on, capped at max:
// min(step × n, max) before retry n. It is the growth RabbitMQ 4.3's delayed
// retry applies (min × delivery count, capped at max), so a Linear policy
// can hold its waits inside the queue (HoldWaits(WaitsInQueue)); on rungs
// it is an ordinary schedule. It has no jitter. attempts < 1, a step that
// is not positive or a max below step make Err non-nil.
func Linear(attempts int, step, max time.Duration) RetryPolicy {
	p := RetryPolicy{maxAttempts: attempts, initial: step, max: max, linear: true}
	switch {
	case attempts < 1:
		p.err = configErr("Linear(attempts)", "a policy needs at least 1 attempt (the first delivery counts), got %d", attempts)
	case step <= 0:
		p.err = configErr("Linear(step)", "the step must be positive, got %v", step)
	case max < step:
		p.err = configErr("Linear(max)", "the longest wait (%v) cannot be shorter than the step (%v)", max, step)
	}
	return p
}

// HoldWaits returns the policy with its waits held where w says (see
// RetryWaits). An unknown value, or WaitsInQueue (or
// WaitsInQueueWhereSupported) on a schedule the broker cannot hold (an
// Exponential that grows, a wait of 0 or one that is not a whole number of
// milliseconds), makes Err non-nil.
func (p RetryPolicy) HoldWaits(w RetryWaits) RetryPolicy {
	p.waits = w
	if p.err != nil {
		return p
	}
	switch w {
	case WaitsOnRungs:
	case WaitsInQueue, WaitsInQueueWhereSupported:
		if err := p.inQueueProblem(); err != nil {
			p.err = err
		}
	default:
		p.err = configErr("HoldWaits", "%v is not a RetryWaits value; use WaitsOnRungs, WaitsInQueue or WaitsInQueueWhereSupported", w)
	}
	return p
}

// inQueueProblem says why the broker cannot hold this schedule, or nil.
func (p RetryPolicy) inQueueProblem() error {
	if p.attemptLimit() < 2 {
		return nil // never waits
	}
	lo, hi := p.delayAt(0), p.delayAt(p.attemptLimit()-2)
	switch {
	case p.exponential && lo != hi:
		return configErr("HoldWaits", "RabbitMQ's delayed retry grows linearly (min × delivery count, capped at max), so an exponential schedule (%v, %v, …) cannot be held in the queue; use Linear(attempts, step, max) or Fixed", lo, p.delayAt(1))
	case lo <= 0:
		return configErr("HoldWaits", "a wait held in the queue must be at least 1ms, got %v", lo)
	case lo%time.Millisecond != 0 || p.max%time.Millisecond != 0:
		return configErr("HoldWaits", "RabbitMQ holds waits in whole milliseconds; %v and %v are not", lo, p.max)
	}
	return nil
}

// inQueueBounds returns the broker's min and max for the policy's waits
// (the first wait and the cap), in milliseconds.
func (p RetryPolicy) inQueueBounds() (minMs, maxMs int64) {
	lo := p.delayAt(0)
	hi := lo
	switch {
	case p.linear:
		hi = p.max
	case p.exponential:
		hi = p.delayAt(p.attemptLimit() - 2)
	}
	return lo.Milliseconds(), hi.Milliseconds()
}

// holdsInQueue reports whether the policy asks for its waits in the queue
// (always or where supported) and has waits to hold.
func (p RetryPolicy) holdsInQueue() bool {
	return (p.waits == WaitsInQueue || p.waits == WaitsInQueueWhereSupported) && p.attemptLimit() > 1
}

// delayedRetryArguments returns the queue arguments RabbitMQ 4.3 needs to
// hold this policy's waits inside the queue (x-delayed-retry-type "failed",
// x-delayed-retry-min and x-delayed-retry-max, in milliseconds), or nil when
// the policy does not hold its waits there (WaitsOnRungs, no retries, or an
// invalid policy). Topology.Retries adds them to the queue it names; they
// are for declaring such a queue anywhere else (another tool, a broker
// policy's delayed-retry-* keys). The result is a fresh table.
func (p RetryPolicy) delayedRetryArguments() transport.Table {
	if !p.holdsInQueue() || p.Err() != nil {
		return nil
	}
	lo, hi := p.inQueueBounds()
	return transport.Table{
		"x-delayed-retry-type": delayedRetryType,
		"x-delayed-retry-min":  lo,
		"x-delayed-retry-max":  hi,
	}
}

// inQueueWait is the wait RabbitMQ holds a delivery for after the given
// failed attempt: min(min × attempt, max) (the delivery count after the
// failure is the attempt, counting from 1).
func (p RetryPolicy) inQueueWait(attempt int) time.Duration {
	lo, hi := p.inQueueBounds()
	if attempt < 1 {
		attempt = 1
	}
	w := lo
	if int64(attempt) <= math.MaxInt64/lo {
		w = lo * int64(attempt)
	} else {
		w = hi
	}
	if w > hi {
		w = hi
	}
	return time.Duration(w) * time.Millisecond
}

// delayedRetrySupport says whether a broker that introduced itself as
// product/version holds retry waits inside a quorum queue (RabbitMQ 4.3 or
// later), and if not, why, in a sentence naming the broker.
func delayedRetrySupport(product, version string) (bool, string) {
	switch {
	case product == "" && version == "":
		return false, "the broker did not name its version (memory:// holds no waits inside a queue)"
	case !strings.EqualFold(product, "RabbitMQ"):
		return false, fmt.Sprintf("the broker is %s %s, not RabbitMQ 4.3 or later", product, version)
	}
	major, minor, ok := versionNumbers(version)
	if !ok {
		return false, fmt.Sprintf("RabbitMQ names its version %q, which does not read as major.minor", version)
	}
	if major > 4 || major == 4 && minor >= 3 {
		return true, ""
	}
	return false, fmt.Sprintf("RabbitMQ %s has no delayed retry (4.3 added it)", version)
}

// versionNumbers reads the major and minor numbers at the start of a
// version such as "4.3.6" or "4.3.0-rc.1".
func versionNumbers(v string) (major, minor int, ok bool) {
	head, rest, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	major, err := strconv.Atoi(head)
	if err != nil {
		return 0, 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	minor, err = strconv.Atoi(rest[:end])
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}
