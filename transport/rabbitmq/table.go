package rabbitmq

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// toAMQPTable converts a seam table for the wire. Tables without nested
// tables share their map (the two types have the same underlying type), so
// the common case allocates nothing.
func toAMQPTable(t transport.Table) amqp.Table {
	if t == nil {
		return nil
	}
	for _, v := range t {
		if needsOutbound(v) {
			out := make(amqp.Table, len(t))
			for k, v := range t {
				out[k] = outboundValue(v)
			}
			return out
		}
	}
	return amqp.Table(t)
}

func needsOutbound(v any) bool {
	switch v := v.(type) {
	case transport.Table, map[string]any:
		// amqp091-go writes only its own Table type as a field table; a
		// plain map (what a caller building headers by hand, or decoding
		// JSON, has) is the same thing under another name.
		return true
	case amqp.Table:
		for _, e := range v {
			if needsOutbound(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if needsOutbound(e) {
				return true
			}
		}
	}
	return false
}

func outboundValue(v any) any {
	switch v := v.(type) {
	case transport.Table:
		return toAMQPTable(v)
	case map[string]any:
		return toAMQPTable(transport.Table(v))
	case amqp.Table:
		return toAMQPTable(transport.Table(v))
	case []any:
		if !needsOutbound(v) {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = outboundValue(e)
		}
		return out
	}
	return v
}

// fromAMQPTable converts a received table, leaving value types as amqp091
// decoded them except that nested amqp.Table values become transport.Table.
// Tables without nested tables share their map.
func fromAMQPTable(t amqp.Table) transport.Table {
	if t == nil {
		return nil
	}
	for _, v := range t {
		if needsInbound(v) {
			out := make(transport.Table, len(t))
			for k, v := range t {
				out[k] = inboundValue(v)
			}
			return out
		}
	}
	return transport.Table(t)
}

func needsInbound(v any) bool {
	switch v := v.(type) {
	case amqp.Table:
		return true
	case []any:
		for _, e := range v {
			if needsInbound(e) {
				return true
			}
		}
	}
	return false
}

func inboundValue(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return fromAMQPTable(v)
	case []any:
		if !needsInbound(v) {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = inboundValue(e)
		}
		return out
	}
	return v
}
