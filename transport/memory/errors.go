package memory

import (
	"fmt"

	"github.com/acemq-go/acemq/transport"
)

// The reply texts below follow RabbitMQ's wording, so logs and tests read
// the same on either broker.

func chanErr(code int, prefix, format string, args ...any) *transport.Error {
	return &transport.Error{Code: code, Reason: prefix + " - " + fmt.Sprintf(format, args...), Server: true}
}

func errNoQueue(name string) *transport.Error {
	return chanErr(transport.CodeNotFound, "NOT_FOUND", "no queue '%s' in vhost '/'", name)
}

func errNoExchange(name string) *transport.Error {
	return chanErr(transport.CodeNotFound, "NOT_FOUND", "no exchange '%s' in vhost '/'", name)
}

func errDefaultExchange() *transport.Error {
	return chanErr(transport.CodeAccessRefused, "ACCESS_REFUSED", "operation not permitted on the default exchange")
}

func errReserved(kind, name string) *transport.Error {
	return chanErr(transport.CodeAccessRefused, "ACCESS_REFUSED", "%s name '%s' contains reserved prefix 'amq.*'", kind, name)
}

func errLocked(name string) *transport.Error {
	return chanErr(transport.CodeResourceLocked, "RESOURCE_LOCKED",
		"cannot obtain exclusive access to locked queue '%s' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name)
}

func errInequivalent(arg, kind, name, received, current string) *transport.Error {
	return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED",
		"inequivalent arg '%s' for %s '%s' in vhost '/': received %s but current is %s", arg, kind, name, received, current)
}

func errUnknownTag(tag uint64) *transport.Error {
	return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "unknown delivery tag %d", tag)
}

func errExclusiveUse(name string) *transport.Error {
	return chanErr(transport.CodeAccessRefused, "ACCESS_REFUSED", "queue '%s' in vhost '/' in exclusive use", name)
}

func errTransientQueue(name string) *transport.Error {
	e := chanErr(transport.CodeInternalError, "INTERNAL_ERROR",
		"queue '%s' in vhost '/' is transient and not exclusive; transient non-exclusive queues are not supported (declare it durable or exclusive)", name)
	e.Connection = true
	return e
}

func errForced() *transport.Error {
	return &transport.Error{
		Code:       transport.CodeConnectionForced,
		Reason:     "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
		Server:     true,
		Connection: true,
	}
}

// closedErr is what operations on an ended channel or connection return:
// ErrClosed, plus the reason it ended when there is one.
func closedErr(cause error) error {
	if cause == nil {
		return transport.ErrClosed
	}
	return fmt.Errorf("%w: %w", transport.ErrClosed, cause)
}
