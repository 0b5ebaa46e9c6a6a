package pipeline

import (
	"context"
	"fmt"

	"github.com/acemq-go/acemq"
)

// Then wraps f as a handler whose result goes to a fixed next destination
// (behaviour §7.6, then-publish). When f returns a value with ok=true, the
// value is published to exchange/routingKey (mandatory, confirmed, fresh
// id, correlation kept, causation = the incoming id, opts applied) and
// the incoming message is accepted only after the broker confirmed and
// routed it. ok=false accepts and publishes nothing. An error from f, or
// a hop that is unroutable, nacked or cannot be sent, becomes a Retry,
// so the consumer's retry policy runs f again. The handler is safe for
// concurrent use when f is.
func Then[In, Out any](c *acemq.Conn, exchange, routingKey string, f func(ctx context.Context, m *acemq.Message[In]) (out Out, ok bool, err error), opts acemq.SendOptions) acemq.Handler[In] {
	return func(ctx context.Context, m *acemq.Message[In]) acemq.Decision {
		out, ok, err := f(ctx, m)
		if err != nil {
			return acemq.Retry(err)
		}
		if !ok {
			return acemq.Accept()
		}
		env := m.Envelope.CausedBy(m.Envelope)
		env.Origin = c.Config().Origin
		env.Type = ""
		for name := range env.Headers() {
			if brokerOwned(name) {
				env = env.WithoutHeader(name)
			}
		}
		o := opts
		o.Envelope, o.Mandatory = &env, true
		if _, err := c.Publish(ctx, exchange, routingKey, out, o); err != nil {
			return acemq.Retry(fmt.Errorf("acemq: the handler's result could not be published to exchange %q, routing key %q: %w", exchange, routingKey, err))
		}
		return acemq.Accept()
	}
}
