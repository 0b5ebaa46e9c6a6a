package memory

import (
	"fmt"

	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// checkedQueueArgs are the queue arguments RabbitMQ compares on re-declare;
// any other argument is ignored, as it is there.
var checkedQueueArgs = []string{
	"x-queue-type",
	"x-message-ttl",
	"x-expires",
	"x-dead-letter-exchange",
	"x-dead-letter-routing-key",
	"x-dead-letter-strategy",
	"x-max-length",
	"x-max-length-bytes",
	"x-max-priority",
	"x-overflow",
	"x-single-active-consumer",
	"x-delivery-limit",
}

// toInt64 reports v as an int64 when it is an integer of any width, so
// int32(5) and int64(5) compare equal as they do in RabbitMQ.
func toInt64(v any) (int64, bool) { return wire.Int(v) }

// equalValue compares field-table values the way the broker does:
// integers across widths, tables and arrays element by element.
func equalValue(a, b any) bool {
	if ai, ok := toInt64(a); ok {
		bi, ok := toInt64(b)
		return ok && ai == bi
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case transport.Table:
		y, ok := b.(transport.Table)
		return ok && equalTables(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func equalTables(a, b transport.Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !equalValue(v, w) {
			return false
		}
	}
	return true
}

// describeArg renders an argument value the way RabbitMQ's inequivalence
// messages do.
func describeArg(v any, present bool) string {
	if !present {
		return "none"
	}
	return fmt.Sprintf("the value '%v' of type '%s'", v, fieldType(v))
}

// fieldType names a field-table value's AMQP type as RabbitMQ's messages
// do (longstr, signedint, long, bool, ...).
func fieldType(v any) string {
	switch v.(type) {
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "signedint"
	case bool:
		return "bool"
	}
	if _, ok := toInt64(v); ok {
		return "long"
	}
	return "longstr"
}

// queueType returns the declared x-queue-type, defaulting to classic.
func queueType(args transport.Table) string {
	if s, ok := args["x-queue-type"].(string); ok && s != "" {
		return s
	}
	return "classic"
}

// compareQueueArgs returns the 406 RabbitMQ would give for re-declaring
// queue name with args when it was declared with current, or nil.
func compareQueueArgs(name string, received, current transport.Table) *transport.Error {
	for _, k := range checkedQueueArgs {
		if k == "x-queue-type" {
			r, c := queueType(received), queueType(current)
			if r != c {
				return errInequivalent(k, "queue", name, "'"+r+"'", "'"+c+"'")
			}
			continue
		}
		rv, rok := received[k]
		cv, cok := current[k]
		if rok != cok || (rok && !equalValue(rv, cv)) {
			return errInequivalent(k, "queue", name, describeArg(rv, rok), describeArg(cv, cok))
		}
	}
	return nil
}

func quoteBool(b bool) string { return fmt.Sprintf("'%t'", b) }
