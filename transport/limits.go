package transport

import (
	"fmt"
	"reflect"
	"time"
)

// DefaultFrameMax is RabbitMQ's default frame_max, the largest AMQP frame
// (header and end octet included) a connection may carry. A message's
// content header (its properties and headers table) must fit in one
// frame; only the body is split.
const DefaultFrameMax = 131072

// DefaultMaxMessageSize is RabbitMQ 4's default max_message_size, 16 MiB:
// the largest body the broker accepts (RabbitMQ 3.10 to 3.13 accepted
// 128 MiB). A larger body is refused with 406 PRECONDITION_FAILED, which
// closes the publishing channel.
const DefaultMaxMessageSize = 16 << 20

// The limits a LimitError names.
const (
	LimitFrameMax       = "frame_max"
	LimitMaxMessageSize = "max_message_size"
)

// LimitError is a publish refused before anything was written because the
// message is over a size limit: its content header frame over the
// connection's negotiated frame_max (the broker would close the whole
// connection on it), or its body over a maximum message size (the broker
// would close the publishing channel). It matches ErrNotWritten: the
// message certainly did not arrive, nothing else on the connection is
// affected, and sending it again unchanged cannot help.
type LimitError struct {
	// Limit is LimitFrameMax or LimitMaxMessageSize.
	Limit string
	// Size is the message's size as the limit counts it: the whole content
	// header frame for frame_max, the body for max_message_size.
	Size int
	// Max is the limit.
	Max int
}

// Error says which size is over which limit.
func (e *LimitError) Error() string {
	if e.Limit == LimitFrameMax {
		return fmt.Sprintf("the content header frame would be %d bytes, over the connection's frame_max of %d", e.Size, e.Max)
	}
	return fmt.Sprintf("the body is %d bytes, over the maximum message size of %d", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrNotWritten) true.
func (e *LimitError) Is(target error) bool { return target == ErrNotWritten }

// CheckFrameMax returns a *LimitError when the content header frame of
// msg would be over frameMax (0 or less: no limit), or nil. A transport
// calls it (or measures with ContentHeaderFrameSize) in Publish, before
// writing: RabbitMQ closes the whole connection on a frame over its
// frame_max. It costs one walk over the headers.
func CheckFrameMax(msg *Message, frameMax int) error {
	if frameMax > 0 {
		if n := ContentHeaderFrameSize(&msg.Properties); n > frameMax {
			return &LimitError{Limit: LimitFrameMax, Size: n, Max: frameMax}
		}
	}
	return nil
}

// ContentHeaderFrameSize returns the size in bytes of the content header
// frame a publish with properties p is written as: frame header (7), class,
// weight, body size and property flags (14), the properties, frame end (1).
// Header values are counted as the RabbitMQ transport writes them (an int
// that fits 32 bits as 'I', a larger one as 'l'); a value of a type this
// package does not know counts 9 bytes, the largest fixed-size field.
func ContentHeaderFrameSize(p *Properties) int {
	n := 7 + 14 + 1
	if p.ContentType != "" {
		n += 1 + len(p.ContentType)
	}
	if len(p.Headers) > 0 {
		n += tableSize(p.Headers)
	}
	if p.DeliveryMode > 0 {
		n++
	}
	if p.Priority > 0 {
		n++
	}
	if p.ReplyTo != "" {
		n += 1 + len(p.ReplyTo)
	}
	if p.MessageID != "" {
		n += 1 + len(p.MessageID)
	}
	return n
}

// HeaderSize returns the bytes one headers-table entry takes in a content
// header: its name (a short string) and its tagged value.
func HeaderSize(name string, v any) int {
	return 1 + len(name) + FieldSize(v)
}

// FieldSize returns the bytes one field value takes in a table, its type
// tag included.
func FieldSize(v any) int {
	return fieldSize(v, 0)
}

// maxSizeDepth bounds the walk, so a table that holds itself is counted
// to a depth and then stops (the write refuses such a table).
const maxSizeDepth = 64

func tableSize(t map[string]any) int {
	return tableSizeAt(t, 0)
}

func tableSizeAt(t map[string]any, depth int) int {
	n := 4
	for k, v := range t {
		n += 1 + len(k) + fieldSize(v, depth)
	}
	return n
}

func fieldSize(v any, depth int) int {
	switch v := v.(type) {
	case nil:
		return 1
	case bool, int8:
		return 2
	case int16, uint8: // uint8 is widened to a 16-bit s (see the transports)
		return 3
	case int32, uint16, float32: // uint16 to a 32-bit I
		return 5
	case int:
		if v >= -1<<31 && v <= 1<<31-1 {
			return 5
		}
		return 9
	case int64, float64, time.Time, uint32, uint, uint64: // unsigned 32/64 to a 64-bit l
		return 9
	case string:
		return 5 + len(v)
	case []byte:
		return 5 + len(v)
	case []any:
		n := 5
		if depth >= maxSizeDepth {
			return n
		}
		for _, e := range v {
			n += fieldSize(e, depth+1)
		}
		return n
	case Table:
		if depth >= maxSizeDepth {
			return 5
		}
		return 1 + tableSizeAt(v, depth+1)
	case map[string]any:
		if depth >= maxSizeDepth {
			return 5
		}
		return 1 + tableSizeAt(v, depth+1)
	}
	// A transport's own types (the RabbitMQ driver's decimal and table);
	// no fixed-size field is larger than 9 bytes.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String {
		if depth >= maxSizeDepth {
			return 5
		}
		n := 5
		for it := rv.MapRange(); it.Next(); {
			n += 1 + it.Key().Len() + fieldSize(it.Value().Interface(), depth+1)
		}
		return n
	}
	return 9
}
