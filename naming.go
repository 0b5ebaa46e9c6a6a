package acemq

import (
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

// RenderDelay renders a rung delay: whole seconds truncated, then the
// largest whole unit (0s, 1s, 90s, 1m, 5m, 2h).
func RenderDelay(d time.Duration) string { panic("naming: not implemented yet") }

// RetryQueue returns the rung name "{q}.retry.{RenderDelay(delay)}".
func RetryQueue(q string, delay time.Duration) string { return q + ".retry." + RenderDelay(delay) }

// rungArguments returns exactly the three rung arguments.
func rungArguments(q string, delay time.Duration) transport.Table {
	panic("naming: not implemented yet")
}
