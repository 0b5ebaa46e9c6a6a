package memory

import (
	"time"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// message is one published message. It is immutable once built and shared
// by every queue it was routed to; each queue holds its own entry for it.
type message struct {
	exchange   string
	routingKey string
	props      transport.Properties
	body       []byte
	// dead: the broker made this message by dead-lettering, so its
	// x-death family is the broker's own record. A publisher's x-death
	// headers are only headers: RabbitMQ 4 keeps its death record apart
	// and starts a published message's afresh (withDeath).
	dead bool
}

// newMessage copies what the publisher gave, so callers may reuse their
// buffers as soon as Publish returns; headers is the broker's own table
// (takeHeaders). The copies are carved from s.
func newMessage(msg *transport.Message, headers transport.Table, s *slab) *message {
	m := s.message()
	*m = message{exchange: msg.Exchange, routingKey: msg.RoutingKey, props: msg.Properties}
	m.props.Headers = headers
	m.body = s.body(msg.Body)
	return m
}

// takeHeaders checks that every header value has an AMQP 0-9-1 field type
// and returns the table the broker keeps: a deep copy, or, for a table
// handed over with HeadersOwned, the table itself with only the values
// that could still change (nested tables, slices) copied in place. Both
// happen in one pass over the table.
func takeHeaders(msg *transport.Message) (transport.Table, int, error) {
	t := msg.Headers
	if len(t) == 0 {
		return copyTable(t), 0, nil
	}
	if !msg.HeadersOwned {
		if err := transport.CheckHeaders(t); err != nil {
			return nil, 0, err
		}
		return copyTable(t), transport.FieldSize(t) - 1, nil
	}
	size := 4
	for k, v := range t {
		size += transport.HeaderSize(k, v)
		switch v.(type) {
		case string, int64, int32, int, bool, float64, time.Time, nil:
			continue // the engine's own values: nothing to check or copy
		}
		if err := transport.CheckHeaders(transport.Table{k: v}); err != nil {
			return nil, 0, err
		}
		switch v.(type) {
		case transport.Table, map[string]any, []any, []byte:
			t[k] = copyValue(v)
		}
	}
	return t, size, nil
}

// copyTable deep-copies a field table so no caller can change what the
// broker holds (or what another consumer sees).
func copyTable(t transport.Table) transport.Table {
	if t == nil {
		return nil
	}
	out := make(transport.Table, len(t))
	for k, v := range t {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case transport.RawField:
		// The broker holds values: the field's bytes are read as RabbitMQ
		// would read them off the wire.
		if d, err := wire.DecodeField(x); err == nil {
			return copyValue(d)
		}
		return append([]byte(nil), x...)
	case transport.Table:
		return copyTable(x)
	case map[string]any:
		return map[string]any(copyTable(transport.Table(x)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	case []byte:
		return append([]byte(nil), x...)
	case time.Time:
		return x
	}
	return v
}

// delivery builds what a consumer or Get receives. Headers are copied so
// consumers cannot race each other through a shared map, unless shared
// says the subscriber only reads them (the message's table is never
// changed once built); the body is shared and must be treated as
// read-only, as with any Delivery.
func (e *entry) delivery(quorum, shared bool) transport.Delivery {
	d := transport.Delivery{
		Properties:  e.m.props,
		Body:        e.m.body,
		Exchange:    e.m.exchange,
		RoutingKey:  e.m.routingKey,
		Redelivered: e.redelivered,
	}
	// A quorum queue's counts, as RabbitMQ 4.3 writes them: each only once
	// it is above 0.
	if quorum && e.deliveries > 1 || (d.Headers != nil && !shared) {
		d.Headers = copyTable(d.Headers)
		if quorum && e.deliveries > 1 {
			if d.Headers == nil {
				d.Headers = transport.Table{}
			}
			d.Headers["x-acquired-count"] = int64(e.deliveries - 1)
			if e.failures > 0 {
				d.Headers["x-delivery-count"] = int64(e.failures)
			}
		}
	}
	return d
}
