package acemq

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// ErrClosed is returned by operations on a closed Conn, publisher or
// consumer, and by a channel (Conn.Channel) whose connection has ended. It
// is transport.ErrClosed: one sentinel, whichever layer noticed.
var ErrClosed = transport.ErrClosed

// ErrDrainTimeout matches a DrainTimeoutError with errors.Is.
var ErrDrainTimeout = errors.New("acemq: the drain did not finish in time")

// ErrPublishingPaused matches a PublishingPausedError with errors.Is.
var ErrPublishingPaused = errors.New("acemq: publishing is paused")

// PublishError is returned for every publish that did not end confirmed
// (or, with confirms off, written). errors.As reaches it from any publish
// error, including a PublishingPausedError and a BatchPublishError.
type PublishError struct {
	MessageID  string
	Exchange   string
	RoutingKey string
	// Reason is the sentence after the "cannot publish ..." prefix.
	Reason string
	// Unroutable is true when a mandatory publish came back from the
	// broker: it was taken, and reached no queue.
	Unroutable bool
	// Sent is true when any byte of the message may have been written, so
	// the message may have arrived. False means it certainly did not.
	Sent bool
	// Nacked is true when the broker answered with a nack: the message
	// reached the broker, which refused to take responsibility for it.
	Nacked bool
	// ReplyCode is the broker's AMQP reply code when the broker answered
	// with one: 312 (NO_ROUTE) for an unroutable message, the channel's
	// close code when the broker closed the publishing channel; 0 otherwise.
	ReplyCode int
	// Outcome is the metric word for this failure: "unroutable", "refused"
	// or "failed".
	Outcome Outcome
	// Err is the cause, if any.
	Err error
}

// Error renders the contract sentence for this failure. An id longer than
// 64 bytes shows as its first 64 bytes and its length; MessageID keeps it
// whole.
func (e *PublishError) Error() string {
	if e.Unroutable {
		return fmt.Sprintf("acemq: message %s to exchange %s with key %s reached no queue: %s",
			idtext.Short(e.MessageID), strconv.Quote(e.Exchange), strconv.Quote(e.RoutingKey), e.Reason)
	}
	return fmt.Sprintf("acemq: cannot publish message %s to exchange %s with key %s: %s",
		idtext.Short(e.MessageID), strconv.Quote(e.Exchange), strconv.Quote(e.RoutingKey), e.Reason)
}

// Unwrap returns the cause.
func (e *PublishError) Unwrap() error { return e.Err }

// PublishingPausedError is a publish refused before anything was written:
// the broker has blocked the connection, or the connection is being
// recovered. It is a PublishError (errors.As finds both) and matches
// ErrPublishingPaused. The message was certainly not sent; retry later.
type PublishingPausedError struct {
	PublishError
	// BrokerReason is the broker's blocked reason ("low on memory"), empty
	// during recovery.
	BrokerReason string
}

// Is makes errors.Is(err, ErrPublishingPaused) true.
func (e *PublishingPausedError) Is(target error) bool { return target == ErrPublishingPaused }

// As lets errors.As find the embedded PublishError.
func (e *PublishingPausedError) As(target any) bool {
	if p, ok := target.(**PublishError); ok {
		*p = &e.PublishError
		return true
	}
	return false
}

// IsPaused reports whether err is (or wraps) a refusal: publishing was
// paused and nothing was sent (for a batch: every failure was a refusal).
func IsPaused(err error) bool { return errors.Is(err, ErrPublishingPaused) }

// IsUnroutable reports whether err is (or wraps) a PublishError for a
// mandatory message the broker could not route (for a batch: every
// failure was unroutable).
func IsUnroutable(err error) bool {
	var b *BatchPublishError
	if errors.As(err, &b) {
		return b.AllUnroutable
	}
	var p *PublishError
	return errors.As(err, &p) && p.Unroutable
}

// Result is one message's answer inside a batch: what was sent, or why not.
type Result struct {
	Sent Sent
	Err  error
}

// BatchPublishError reports a SendAll in which at least one message was not
// confirmed. Every message was awaited, so the counts are real; Results
// holds each message's answer in payload order, so only failures need
// resending. errors.As reaches the first failure in payload order (its
// *PublishError); errors.Is matches ErrPublishingPaused only when every
// failure was a refusal, and any other target as the first failure does.
type BatchPublishError struct {
	Total     int
	Confirmed int
	Failed    int
	// First is the first failure in payload order.
	First error
	// AllPaused and AllUnroutable say whether every failure was of that kind.
	AllPaused     bool
	AllUnroutable bool
	// Results holds every message's result in payload order.
	Results []Result
}

// Error renders the family's batch sentence, word for word.
func (e *BatchPublishError) Error() string {
	first := ""
	if e.First != nil {
		first = e.First.Error()
		if strings.TrimSpace(first) == "" {
			first = reflect.TypeOf(e.First).String()
		}
	}
	return fmt.Sprintf("%d of %d messages were not confirmed; %d were. The first failure was: %s",
		e.Failed, e.Total, e.Total-e.Failed, first)
}

// As finds target in the first failure, so errors.As reaches its
// PublishError. (There is no Unwrap: through it errors.Is would find the
// first failure's refusal in a batch that also holds other failures.)
func (e *BatchPublishError) As(target any) bool {
	return e.First != nil && errors.As(e.First, target)
}

// Is makes errors.Is(err, ErrPublishingPaused) true only when every
// failure was a refusal; any other target matches as it matches the first
// failure.
func (e *BatchPublishError) Is(target error) bool {
	if target == ErrPublishingPaused {
		return e.AllPaused
	}
	return e.First != nil && errors.Is(e.First, target)
}

type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// Fatal marks err as "retrying cannot help": a retry decision carrying it
// dead-letters at once (outcome rejected), and a decode failure carrying it
// parks. Fatal(nil) returns nil.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// Retryable marks err as "may succeed later": a decode or interceptor
// failure carrying it takes the retry path instead of being set aside.
// Retryable(nil) returns nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

// IsFatal reports whether err is or wraps an error marked with Fatal.
func IsFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

// IsRetryable reports whether err is or wraps an error marked with Retryable.
func IsRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// ConfigurationError is a setting that can never work. Retrying cannot
// help; fix the named option.
type ConfigurationError struct {
	Option string
	Reason string
}

// Error names the option and what is wrong with it.
func (e *ConfigurationError) Error() string {
	return fmt.Sprintf("acemq: option %s: %s", e.Option, e.Reason)
}

func configErr(option, format string, args ...any) error {
	return &ConfigurationError{Option: option, Reason: fmt.Sprintf(format, args...)}
}

// DrainTimeoutError says the drain deadline passed with deliveries still
// unsettled; they will be redelivered by the broker. errors.Is(err,
// ErrDrainTimeout) matches it.
type DrainTimeoutError struct {
	Timeout time.Duration
	// Stranded counts unsettled deliveries per queue.
	Stranded map[string]int
}

// Error renders the drain sentence: the deadline, how many deliveries were
// left and which queues they are on.
func (e *DrainTimeoutError) Error() string {
	total := 0
	queues := make([]string, 0, len(e.Stranded))
	for q, n := range e.Stranded {
		total += n
		queues = append(queues, q)
	}
	sort.Strings(queues)
	parts := make([]string, 0, len(queues))
	for _, q := range queues {
		parts = append(parts, fmt.Sprintf("%s (%d)", q, e.Stranded[q]))
	}
	noun := "deliveries were"
	if total == 1 {
		noun = "delivery was"
	}
	s := fmt.Sprintf("acemq: the drain did not finish within %s: %d %s left unsettled and will be redelivered", e.Timeout, total, noun)
	if len(parts) > 0 {
		s += " — " + strings.Join(parts, ", ")
	}
	return s
}

// Is makes errors.Is(err, ErrDrainTimeout) true.
func (e *DrainTimeoutError) Is(target error) bool { return target == ErrDrainTimeout }

type exactReason struct{ err error }

func (e *exactReason) Error() string { return e.err.Error() }
func (e *exactReason) Unwrap() error { return e.err }

// ExactReason marks err so that, when a Reject, Park or fatal Retry sets
// the message aside, x-acemq-error is err's text exactly, without the
// decision's prefix ("the handler rejected it: "). Patterns use it for the
// contract's fixed sentences. ExactReason(nil) returns nil.
func ExactReason(err error) error {
	if err == nil {
		return nil
	}
	return &exactReason{err}
}

// reasonText renders a set-aside reason: prefix + err, or err alone when it
// is marked with ExactReason.
func reasonText(prefix string, err error) string {
	var x *exactReason
	if errors.As(err, &x) {
		return x.Error()
	}
	return prefix + errText(err)
}
