package rabbitmq

import (
	"math"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// toAMQPTable converts a seam table for the wire. Tables without nested
// tables, unsigned values or ints past 32 bits share their map (the two
// types have the same underlying type), so the common case allocates
// nothing.
//
// amqp091-go writes every int as a 32-bit 'I', cutting off the high bits
// of a larger one, so an int that does not fit is handed over as an int64
// ('l', its exact value). It writes uint8, uint16 and uint32 as 'B', 'u'
// and 'i', which bunny (Ruby) cannot read, and refuses uint and uint64, so
// unsigned values are handed over as the next wider signed type
// (wire.Signed); one above math.MaxInt64 is left as it is, for
// amqp.Table.Validate to refuse. The native path (appendField) writes the
// same bytes.
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
	case int:
		return v < math.MinInt32 || v > math.MaxInt32
	case uint8, uint16, uint32, uint, uint64, transport.RawField:
		return true
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
	case transport.RawField:
		// amqp091-go writes values, not bytes: the field is decoded and
		// written again (same values; integer widths as amqp091-go picks).
		d, err := wire.DecodeField(v)
		if err != nil {
			return []byte(v)
		}
		return outboundValue(d)
	case int:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return int64(v)
		}
		return v
	case uint8, uint16, uint32, uint, uint64:
		s, _ := wire.Signed(v)
		return s
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
