package acemq

import (
	"strconv"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Library exchange names (contract §3.1).
const (
	DeadLetterExchange = "acemq.dlx"
	RetryExchange      = "acemq.retry"
)

// DeadLetterQueue returns "{q}.dlq".
func DeadLetterQueue(q string) string { return q + ".dlq" }

// ParkedQueue returns "{q}.parked".
func ParkedQueue(q string) string { return q + ".parked" }

// renderDelay renders a rung delay: whole seconds truncated, then the
// largest whole unit (0s, 1s, 90s, 1m, 5m, 2h). A delay under one second,
// negative ones included, renders "0s" (contract §9 D1).
func renderDelay(d time.Duration) string {
	s := d.Milliseconds() / 1000
	switch {
	case s <= 0:
		return "0s"
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	default:
		return strconv.FormatInt(s, 10) + "s"
	}
}

// RetryQueue returns the rung name "{q}.retry.{renderDelay(delay)}".
func RetryQueue(q string, delay time.Duration) string { return q + ".retry." + renderDelay(delay) }

// rungArguments returns exactly the three rung arguments (contract §3.3):
// the TTL in milliseconds and the way home through acemq.retry.
func rungArguments(q string, delay time.Duration) transport.Table {
	return delayQueue(RetryQueue(q, delay), delay, RetryExchange, q).Queue.Args
}
