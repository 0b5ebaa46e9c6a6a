package slip

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
)

// Start publishes payload, encoded with the Conn's codec, to s's first
// step with the slip attached. It returns once the broker confirmed and
// routed the message; the error is the Conn's publish error.
func Start(ctx context.Context, c *acemq.Conn, s Slip, payload any, o acemq.SendOptions) (acemq.Sent, error) {
	if err := s.validate(); err != nil {
		return acemq.Sent{}, err
	}
	j, err := s.MarshalJSON()
	if err != nil {
		return acemq.Sent{}, err
	}
	first := s.Steps[0]
	h := make(map[string]any, len(o.Headers)+1)
	for k, v := range o.Headers {
		h[k] = v
	}
	h[Header] = string(j)
	o.Headers, o.Mandatory = h, true
	return c.Publish(ctx, first.Exchange, first.RoutingKey, payload, o)
}

// Follow wraps h as one step of an itinerary. For each delivery it reads
// the itinerary (either form); a message with none, or with one that
// cannot be read, is rejected as fatal — dead-lettered with the reason,
// never retried. Otherwise h runs; when h accepts, the message is
// published to the next step in the form it arrived in (fresh id,
// correlation kept, causation = this message's id, the same body, content
// type and application headers, mandatory and confirmed) and only then
// accepted. With no step left the message is simply accepted.
//
// A hop that cannot be published (unroutable, nacked, the broker away)
// becomes a Retry with the cause, so the consumer's retry policy runs
// the step again. Any other decision of h (retry, reject, park, in
// progress) is returned unchanged; a dead-lettered message keeps its
// itinerary, so replaying it resumes the run at this step.
//
// The Handler is safe for concurrent use when h is.
func Follow[T any](c *acemq.Conn, h acemq.Handler[T]) acemq.Handler[T] {
	return func(ctx context.Context, m *acemq.Message[T]) acemq.Decision {
		form, s, err := Of(m.Envelope)
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		dec := h(ctx, m)
		if dec != acemq.Accept() { // Accept carries no error or delay: only it compares equal
			return dec
		}
		hop, ok, err := nextHop(c, m.Envelope, m.Exchange, m.ContentType, m.Body, form, s, time.Now())
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		if !ok {
			return dec
		}
		if err := c.PublishRaw(ctx, hop); err != nil {
			return acemq.Retry(fmt.Errorf("acemq: the routing slip's next step (%s) could not be published: %w", describe(hop), err))
		}
		return dec
	}
}

func describe(m acemq.RawMessage) string {
	ex := m.Exchange
	if ex == "" {
		ex = "the default exchange"
	} else {
		ex = "exchange " + fmt.Sprintf("%q", ex)
	}
	return fmt.Sprintf("%s, routing key %q", ex, m.RoutingKey)
}

// nextHop builds the message for the step after this one; false when the
// run ends here.
func nextHop(c *acemq.Conn, in acemq.Envelope, exchange, contentType string, body []byte, form Form, s Slip, now time.Time) (acemq.RawMessage, bool, error) {
	env := in.CausedBy(in)
	env.Origin = c.Config().Origin
	// Application headers go on, less the broker's own and the slip
	// (rewritten below).
	for name := range env.Headers() {
		if brokerOwned(name) || name == Header {
			env = env.WithoutHeader(name)
		}
	}
	var ex, key string
	switch form {
	case JSONSlip:
		next, more := s.Advance(now)
		if !more {
			return acemq.RawMessage{}, false, nil
		}
		j, err := next.MarshalJSON()
		if err != nil {
			return acemq.RawMessage{}, false, err
		}
		if env, err = env.WithHeader(Header, string(j)); err != nil {
			return acemq.RawMessage{}, false, err
		}
		ex, key = next.Steps[0].Exchange, next.Steps[0].RoutingKey
	case RouteHeaders:
		pos := in.RoutePosition + 1
		if pos >= len(in.Route) {
			return acemq.RawMessage{}, false, nil
		}
		env.Route = append([]string(nil), in.Route...)
		env.RoutePosition = pos
		env.RouteID = in.RouteID
		ex, key = exchange, in.Route[pos]
	default:
		return acemq.RawMessage{}, false, fmt.Errorf("acemq: no itinerary to follow")
	}
	if err := env.Validate(); err != nil {
		return acemq.RawMessage{}, false, err
	}
	return acemq.RawMessage{
		Exchange:    ex,
		RoutingKey:  key,
		ContentType: contentType,
		MessageID:   env.ID,
		Headers:     env.WireHeaders(),
		Body:        body,
	}, true, nil
}

// brokerOwned reports headers the broker sets; they are never copied onto
// a hop (contract §1.3).
func brokerOwned(name string) bool {
	return name == "x-death" || name == "x-delivery-count" || name == "x-acquired-count" || name == "x-stream-offset" ||
		strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}
