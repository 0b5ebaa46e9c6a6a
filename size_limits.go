package acemq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/acemq-go/acemq/transport"
)

// ErrMessageTooLarge matches (errors.Is) the *PublishError of a publish
// whose body is over the maximum message size: refused before anything was
// written when it is over Config.MaxMessageSize (16 MiB unless set,
// RabbitMQ 4's max_message_size), or refused by the broker (406
// PRECONDITION_FAILED "message size N is larger than configured max size
// M") when the broker's limit is lower. Either way the message certainly
// did not arrive (Sent is false, Outcome "refused") and sending it again
// cannot help: the Reason names the size and the limit and points at the
// claim check (package claimcheck), which carries a large payload outside
// the message.
var ErrMessageTooLarge = errors.New("acemq: the message is over the maximum message size")

// limitRefusal is the refusal of a publish the transport would not write
// because it is over a size limit (*transport.LimitError), or nil when err
// says something else. It matches ErrHeaderLimit (frame_max) or
// ErrMessageTooLarge, and errors.As reaches the LimitError.
func limitRefusal(msg *transport.Message, err error) error {
	var le *transport.LimitError
	if !errors.As(err, &le) {
		return nil
	}
	if le.Limit == transport.LimitFrameMax {
		reason := fmt.Sprintf("its content header (properties and headers) would be a frame of %d bytes, over the connection's frame_max of %d, and the broker would close the whole connection on it; nothing was sent. Carry large values in the body (or, for a large body, through the claim check, package claimcheck), not in headers", le.Size, le.Max)
		return newPubErr(msg, OutcomeRefused, reason, false, fmt.Errorf("%w: %w", ErrHeaderLimit, le))
	}
	reason := fmt.Sprintf("its body is %d bytes, over the maximum message size of %d (Config.MaxMessageSize; RabbitMQ 4 refuses a body over its max_message_size, 16 MiB by default); nothing was sent. Send a large payload through the claim check (package claimcheck), or raise Config.MaxMessageSize if the broker's max_message_size is higher", le.Size, le.Max)
	return newPubErr(msg, OutcomeRefused, reason, false, fmt.Errorf("%w: %w", ErrMessageTooLarge, le))
}

// bodyRefusal is the refusal of an application's publish (Send, SendAll,
// PublishRaw and so the outbox relay, replay and replies) whose body is
// over Config.MaxMessageSize, or nil. Consumer hops (retry, put-back,
// set-aside copies) are not checked: their body is one the broker has
// already accepted, and a broker whose limit has since been lowered
// answers with its own refusal (brokerSizeRefusal).
func (p *publishing) bodyRefusal(msg *transport.Message) error {
	if max := p.cfg.maxMessage; max > 0 && len(msg.Body) > max {
		return limitRefusal(msg, &transport.LimitError{Limit: transport.LimitMaxMessageSize, Size: len(msg.Body), Max: max})
	}
	return nil
}

// brokerSizeRefusal is the refusal of a publish whose channel the broker
// closed because the body is over its max_message_size (406 "message size
// N is larger than [configured] max size M"), or nil. Only a message whose
// own body is over M is certainly refused; the others in flight on that
// channel stay "unknown".
func brokerSizeRefusal(msg *transport.Message, te *transport.Error) *PublishError {
	if te.Code != transport.CodePreconditionFailed {
		return nil
	}
	i := strings.Index(te.Reason, "message size ")
	if i < 0 {
		return nil
	}
	rest := te.Reason[i+len("message size "):]
	j := strings.Index(rest, " max size ")
	if j < 0 || !strings.Contains(rest[:j], "is larger than") {
		return nil
	}
	limit, err := strconv.Atoi(strings.TrimSpace(rest[j+len(" max size "):]))
	if err != nil || len(msg.Body) <= limit {
		return nil
	}
	reason := fmt.Sprintf("the broker refused it (%d %s): its body is %d bytes, over the broker's max_message_size of %d, so it was not taken and nothing was sent. Send a large payload through the claim check (package claimcheck), and set Config.MaxMessageSize to %d so such a message is refused before it is written", te.Code, te.Reason, len(msg.Body), limit, limit)
	e := newPubErr(msg, OutcomeRefused, reason, false, fmt.Errorf("%w: %w", ErrMessageTooLarge, te))
	e.ReplyCode = te.Code
	return e
}
