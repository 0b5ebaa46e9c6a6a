package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
)

// ErrRequestTimedOut is matched (errors.Is) by the error Request returns
// when no reply arrived within the request's timeout or ctx's deadline,
// whichever came first.
var ErrRequestTimedOut = errors.New("acemq: the request timed out")

// TimeoutError says which request went unanswered. Its text is the
// contract sentence; errors.Is(err, ErrRequestTimedOut) holds, and so does
// errors.Is(err, context.DeadlineExceeded) when ctx's deadline was the one
// that passed.
type TimeoutError struct {
	// ID is the request's envelope id.
	ID string
	// CorrelationID is the correlation the reply would have carried.
	CorrelationID string
	// Timeout is how long Request waited.
	Timeout time.Duration

	ctxDeadline bool
}

// Error says the request may still be queued, being handled, or done: a
// timeout is not proof that nothing happened.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("acemq: no reply to request %s within %s (correlation %s); it may still be queued, being handled, or done", idtext.Short(e.ID), e.Timeout, e.CorrelationID)
}

// Is matches ErrRequestTimedOut.
func (e *TimeoutError) Is(target error) bool { return target == ErrRequestTimedOut }

// Unwrap returns context.DeadlineExceeded when ctx's deadline ended the
// wait, nil when the request's own timeout did.
func (e *TimeoutError) Unwrap() error {
	if e.ctxDeadline {
		return context.DeadlineExceeded
	}
	return nil
}

// ResponderError is an error reply: the responder's handler failed and
// said why in the acemq-error header. The request itself was rejected to
// the responder's dead-letter queue.
type ResponderError struct {
	// ID is the request's envelope id.
	ID string
	// CorrelationID is the request's correlation.
	CorrelationID string
	// Text is the responder's error text, as received.
	Text string
}

// Error returns the responder's text with the request it answers.
func (e *ResponderError) Error() string {
	return fmt.Sprintf("acemq: the responder failed request %s: %s", idtext.Short(e.ID), e.Text)
}
