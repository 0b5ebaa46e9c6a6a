package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
)

// HandlerFunc answers one request. A nil error publishes resp as the reply;
// an error publishes an error reply carrying its text in the acemq-error
// header and rejects the request to the queue's .dlq.
type HandlerFunc[Req, Resp any] func(ctx context.Context, m *acemq.Message[Req]) (Resp, error)

// Respond consumes requests from queue with acemq.Consume (cfg is its
// options) and answers each one to its reply address: the acemq-reply-to
// header first, else the AMQP reply-to property. The reply goes through
// the default exchange, not mandatory (a requester that has gone away is
// not an error), confirmed, with the request's correlation and causation =
// the request's id.
//
// A request with no reply address is rejected as fatal to {queue}.dlq with
// the contract's reason. When h fails, the error reply is published first,
// then the request is rejected to {queue}.dlq. When a reply cannot be
// published the request is retried under the consumer's retry policy, so
// handlers must tolerate running again for the same request.
func Respond[Req, Resp any](ctx context.Context, conn *acemq.Conn, queue string, h HandlerFunc[Req, Resp], cfg acemq.ConsumerConfig) (*acemq.Consumer, error) {
	if h == nil {
		return nil, &acemq.ConfigurationError{Option: "handler", Reason: "the responder's handler is nil"}
	}
	return acemq.Consume(ctx, conn, queue, func(ctx context.Context, m *acemq.Message[Req]) acemq.Decision {
		return answer(ctx, conn, h, m)
	}, cfg)
}

// noReplyAddress is the reason a request without a reply address is
// dead-lettered (contract §8.5).
func noReplyAddress(id string) error {
	return fmt.Errorf("acemq: request %s carries neither the acemq-reply-to header nor a reply-to property, so there is nowhere to reply", id)
}

func answer[Req, Resp any](ctx context.Context, conn *acemq.Conn, h HandlerFunc[Req, Resp], m *acemq.Message[Req]) acemq.Decision {
	env := m.Envelope
	addr := env.ReplyTo // read as the contract says: header first, then property
	if addr == "" {
		return acemq.Reject(acemq.Fatal(acemq.ExactReason(noReplyAddress(env.ID))))
	}
	resp, herr := h(ctx, m)
	opts := acemq.SendOptions{CorrelationID: env.CorrelationID, CausationID: env.ID}
	var payload any = resp
	if herr != nil {
		text := herr.Error()
		payload = text
		opts.Headers = map[string]any{header.ReplyError: text}
	}
	if _, err := conn.Publish(ctx, "", addr, payload, opts); err != nil {
		return acemq.Retry(fmt.Errorf("acemq: cannot publish the reply to request %s to %s: %w", idtext.Short(env.ID), addr, errors.Join(err, herr)))
	}
	if herr != nil {
		return acemq.Reject(herr)
	}
	return acemq.Accept()
}
