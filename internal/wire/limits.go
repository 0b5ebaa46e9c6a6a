package wire

import (
	"fmt"
	"math"
	"strconv"
)

// MaxDepth and MaxEntries are AceMQ's limits for a headers table: no field
// table or array nested deeper than MaxDepth below it, none holding more
// than MaxEntries entries. They are chosen to equal what the consuming
// side's client, amqp091-go, reads: it closes the whole connection on a
// delivery beyond them (RabbitMQ accepts such messages from other
// clients). amqp091-go does not document those limits, so
// transport/rabbitmq's TestAmqp091ReadsHeaderTablesExactlyUpToAceMQsLimits
// holds it to these values through its public API: a release that reads
// more or less fails that test.
const (
	MaxDepth   = 32
	MaxEntries = 8192
)

// Limit describes the first place a header table goes over MaxDepth or
// MaxEntries.
type Limit struct {
	// Header is the top-level header name; Path adds the keys and array
	// indexes below it ("x-deep.a.b[3]"). Both are empty when the headers
	// table itself holds too many entries.
	Header, Path string
	// Depth is how many tables and arrays deep the value nests (a table
	// value of a header is 1); 0 when the problem is the entry count.
	Depth int
	// Entries is the entry count of the container that is too large; 0
	// when the problem is the depth.
	Entries int
	// NonFinite is set when the problem is a NaN or infinite float, which
	// RabbitMQ cannot decode (it closes the publishing connection).
	NonFinite bool
	// Float is that value.
	Float float64
	// Unsigned is set when the problem is a uint or uint64 above
	// math.MaxInt64, which no signed AMQP integer holds (unsigned values
	// are written as the next wider signed type, see Signed).
	Unsigned bool
	// Uint is that value.
	Uint uint64
}

// String says what is over which limit, in words for an error sentence.
func (l Limit) String() string {
	where := "the headers table"
	if l.Path != "" {
		where = "header " + strconv.Quote(l.Path)
	}
	if l.NonFinite {
		return fmt.Sprintf("%s holds the float %v, which RabbitMQ cannot decode (it closes the publishing connection on it)", where, l.Float)
	}
	if l.Unsigned {
		return fmt.Sprintf("%s holds the unsigned integer %d, above %d, the largest integer AMQP clients read (a signed 64-bit 'l')", where, l.Uint, int64(math.MaxInt64))
	}
	if l.Entries > 0 {
		return fmt.Sprintf("%s holds %d entries, over the limit of %d per table or array", where, l.Entries, MaxEntries)
	}
	return fmt.Sprintf("%s nests tables or arrays %d levels deep, over the limit of %d", where, l.Depth, MaxDepth)
}

// CheckHeaders walks a header table as the engine builds it, for the Go
// client's limits, for NaN or infinite floats (which RabbitMQ refuses) and
// for unsigned integers above math.MaxInt64 (which no client reads) (values may be
// map[string]any, named maps of that type registered by the caller through
// asTable, or []any) and reports the first place over a limit. ok is false
// when the headers are within both limits. It never allocates on the
// common, flat case.
func CheckHeaders(h map[string]any, asTable func(any) (map[string]any, bool)) (Limit, bool) {
	if len(h) > MaxEntries {
		return Limit{Entries: len(h)}, true
	}
	for name, v := range h {
		if l, ok := checkValue(v, 1, asTable); ok {
			l.Header = name
			l.Path = name + l.Path
			if l.Depth > 0 {
				// Say how deep it really goes, and name only the header:
				// the path of a hostile header can be hundreds of keys.
				l.Depth, l.Path = Deepest(v, asTable), name
			}
			return l, true
		}
	}
	return Limit{}, false
}

// checkValue checks one value that sits depth containers below the
// headers table when it is itself a container.
func checkValue(v any, depth int, asTable func(any) (map[string]any, bool)) (Limit, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Limit{NonFinite: true, Float: x}, true
		}
		return Limit{}, false
	case float32:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return Limit{NonFinite: true, Float: f}, true
		}
		return Limit{}, false
	case uint64:
		if x > math.MaxInt64 {
			return Limit{Unsigned: true, Uint: x}, true
		}
		return Limit{}, false
	case uint:
		if uint64(x) > math.MaxInt64 {
			return Limit{Unsigned: true, Uint: uint64(x)}, true
		}
		return Limit{}, false
	case []any:
		if depth > MaxDepth {
			return Limit{Depth: depth}, true
		}
		if len(x) > MaxEntries {
			return Limit{Entries: len(x)}, true
		}
		for i, e := range x {
			if l, ok := checkValue(e, depth+1, asTable); ok {
				l.Path = "[" + strconv.Itoa(i) + "]" + l.Path
				return l, true
			}
		}
		return Limit{}, false
	}
	m, isMap := v.(map[string]any)
	if !isMap && asTable != nil {
		m, isMap = asTable(v)
	}
	if !isMap {
		return Limit{}, false
	}
	if depth > MaxDepth {
		return Limit{Depth: depth}, true
	}
	if len(m) > MaxEntries {
		return Limit{Entries: len(m)}, true
	}
	for k, e := range m {
		if l, ok := checkValue(e, depth+1, asTable); ok {
			l.Path = "." + k + l.Path
			return l, true
		}
	}
	return Limit{}, false
}

// Deepest reports how many tables and arrays deep v nests (a scalar is
// 0, a table of scalars 1).
func Deepest(v any, asTable func(any) (map[string]any, bool)) int {
	best := 0
	if x, ok := v.([]any); ok {
		for _, e := range x {
			best = max(best, Deepest(e, asTable))
		}
		return best + 1
	}
	m, isMap := v.(map[string]any)
	if !isMap && asTable != nil {
		m, isMap = asTable(v)
	}
	if !isMap {
		return 0
	}
	for _, e := range m {
		best = max(best, Deepest(e, asTable))
	}
	return best + 1
}
