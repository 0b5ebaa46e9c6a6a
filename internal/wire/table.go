package wire

import (
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Header names for a delivery whose headers the Go client could not have
// read (see the rabbitmq transport's frame guard).
const (
	// UnreadableHeader carries the reason: which header went over which
	// limit. Being x-acemq-, it never reaches application headers.
	UnreadableHeader = "x-acemq-unreadable"
	// KeptHeader carries the unreadable entries as AMQP field-table bytes
	// (the content of a table, without its length), so nothing is lost:
	// DecodeTable reads them back.
	KeptHeader = "acemq-unreadable-headers"
)

// errTable is any malformed encoding: a truncated value or an unknown type.
var errTable = errors.New("malformed AMQP field table")

// maxWalk bounds recursion when walking a hostile table; deeper containers
// are skipped by their length and reported as this deep.
const maxWalk = 1000

// Entry is one top-level entry of an encoded field table.
type Entry struct {
	Start, End int // byte span of the entry (key and value) in the table
	// Depth is how many tables and arrays deep the value nests (0 for a
	// scalar); Widest is the largest entry count of any container in it.
	Depth, Widest int
	// Key aliases the scanned bytes; copy it to keep it.
	Key []byte
}

// Over reports the limit the entry's value goes over, if any.
func (e Entry) Over() (Limit, bool) {
	switch {
	case e.Depth > MaxDepth:
		return Limit{Header: string(e.Key), Path: string(e.Key), Depth: e.Depth}, true
	case e.Widest > MaxEntries:
		return Limit{Header: string(e.Key), Path: string(e.Key), Entries: e.Widest}, true
	}
	return Limit{}, false
}

// ScanTable walks the content of an encoded field table (the bytes after
// its 4-byte length) and calls visit for each top-level entry in order.
// It returns the offset where walking stopped: len(b) when the whole table
// was read, less when an entry could not be read (unknown type, truncated),
// in which case the bytes from there on are opaque. It does not allocate.
func ScanTable(b []byte, visit func(Entry)) int {
	off := 0
	for off < len(b) {
		kl := int(b[off])
		if off+1+kl > len(b) {
			return off
		}
		key := b[off+1 : off+1+kl]
		n, depth, widest, err := skipField(b[off+1+kl:], 0)
		if err != nil {
			return off
		}
		end := off + 1 + kl + n
		if visit != nil {
			visit(Entry{Start: off, End: end, Depth: depth, Widest: widest, Key: key})
		}
		off = end
	}
	return off
}

// skipField measures one field value at level (the number of containers
// around it): its encoded length, how deep it nests, and the largest entry
// count of a container in it.
func skipField(b []byte, level int) (n, depth, widest int, err error) {
	if len(b) < 1 {
		return 0, 0, 0, errTable
	}
	fixed := func(size int) (int, int, int, error) {
		if len(b) < 1+size {
			return 0, 0, 0, errTable
		}
		return 1 + size, 0, 0, nil
	}
	switch b[0] {
	case 't', 'b', 'B':
		return fixed(1)
	case 's', 'u':
		return fixed(2)
	case 'I', 'i', 'f':
		return fixed(4)
	case 'l', 'd', 'T':
		return fixed(8)
	case 'D':
		return fixed(5)
	case 'V':
		return 1, 0, 0, nil
	case 'S', 'x':
		if len(b) < 5 {
			return 0, 0, 0, errTable
		}
		size := binary.BigEndian.Uint32(b[1:5])
		if size > math.MaxInt32 || int(size) > len(b)-5 {
			return 0, 0, 0, errTable
		}
		return 5 + int(size), 0, 0, nil
	case 'F', 'A':
		if len(b) < 5 {
			return 0, 0, 0, errTable
		}
		size := binary.BigEndian.Uint32(b[1:5])
		if size > math.MaxInt32 || int(size) > len(b)-5 {
			return 0, 0, 0, errTable
		}
		inner := b[5 : 5+int(size)]
		if level >= maxWalk {
			return 5 + int(size), 1, 0, nil
		}
		count, deepest := 0, 0
		for off := 0; off < len(inner); count++ {
			if b[0] == 'F' {
				kl := int(inner[off])
				if off+1+kl > len(inner) {
					return 0, 0, 0, errTable
				}
				off += 1 + kl
			}
			m, d, w, err := skipField(inner[off:], level+1)
			if err != nil {
				return 0, 0, 0, err
			}
			off += m
			deepest, widest = max(deepest, d), max(widest, w)
		}
		return 5 + int(size), deepest + 1, max(widest, count), nil
	}
	return 0, 0, 0, errTable
}

// DecodeTable reads the content of an encoded field table (as kept in
// KeptHeader) into Go values, with no depth or size limit beyond the
// bytes given: tables become map[string]any, arrays []any, longstr
// string, byte arrays []byte, timestamps time.Time, decimals a
// map{"scale","value"}. It is for showing such headers to a person.
func DecodeTable(b []byte) (map[string]any, error) {
	out := map[string]any{}
	for off := 0; off < len(b); {
		kl := int(b[off])
		if off+1+kl > len(b) {
			return out, errTable
		}
		key := string(b[off+1 : off+1+kl])
		off += 1 + kl
		v, n, err := decodeField(b[off:], 0, maxWalk)
		if err != nil {
			return out, err
		}
		out[key] = v
		off += n
	}
	return out, nil
}

// DecodeField reads one field (type tag first, as SplitEntries gives it)
// into the Go values DecodeTable uses, however deep it nests: for writing
// it again through a client that cannot take the bytes as they are.
func DecodeField(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, errTable
	}
	v, _, err := decodeField(b, 0, math.MaxInt)
	return v, err
}

func decodeField(b []byte, level, limit int) (any, int, error) {
	n, _, _, err := skipField(b, maxWalk) // length only, no recursion
	if err != nil {
		return nil, 0, err
	}
	v := b[1:n]
	switch b[0] {
	case 't':
		return v[0] != 0, n, nil
	case 'b':
		return int8(v[0]), n, nil
	case 'B':
		return v[0], n, nil
	case 's':
		return int16(binary.BigEndian.Uint16(v)), n, nil
	case 'u':
		return binary.BigEndian.Uint16(v), n, nil
	case 'I':
		return int32(binary.BigEndian.Uint32(v)), n, nil
	case 'i':
		return binary.BigEndian.Uint32(v), n, nil
	case 'f':
		return math.Float32frombits(binary.BigEndian.Uint32(v)), n, nil
	case 'l':
		return int64(binary.BigEndian.Uint64(v)), n, nil
	case 'd':
		return math.Float64frombits(binary.BigEndian.Uint64(v)), n, nil
	case 'T':
		return time.Unix(int64(binary.BigEndian.Uint64(v)), 0).UTC(), n, nil
	case 'D':
		return map[string]any{"scale": v[0], "value": int32(binary.BigEndian.Uint32(v[1:]))}, n, nil
	case 'V':
		return nil, n, nil
	case 'S':
		return string(v[4:]), n, nil
	case 'x':
		return append([]byte(nil), v[4:]...), n, nil
	}
	if level >= limit {
		return "(nested too deep to show)", n, nil
	}
	inner := v[4:]
	if b[0] == 'F' {
		t := map[string]any{}
		for off := 0; off < len(inner); {
			kl := int(inner[off])
			if off+1+kl > len(inner) {
				return nil, 0, errTable
			}
			key := string(inner[off+1 : off+1+kl])
			off += 1 + kl
			e, m, err := decodeField(inner[off:], level+1, limit)
			if err != nil {
				return nil, 0, err
			}
			t[key] = e
			off += m
		}
		return t, n, nil
	}
	arr := []any{}
	for off := 0; off < len(inner); {
		e, m, err := decodeField(inner[off:], level+1, limit)
		if err != nil {
			return nil, 0, err
		}
		arr = append(arr, e)
		off += m
	}
	return arr, n, nil
}

// AppendLongstr appends a table entry key = longstr value.
func AppendLongstr(b []byte, key, value string) []byte {
	b = append(b, byte(len(key)))
	b = append(b, key...)
	b = append(b, 'S')
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// AppendBytes appends a table entry key = byte array value.
func AppendBytes(b []byte, key string, value []byte) []byte {
	b = append(b, byte(len(key)))
	b = append(b, key...)
	b = append(b, 'x')
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// SplitEntries calls fn for each entry of an encoded field table's
// content (as kept in KeptHeader): its key and its field, the type tag and
// the value's bytes exactly as they were sent. It fails on bytes that do
// not read as entries.
func SplitEntries(b []byte, fn func(key string, field []byte)) error {
	for off := 0; off < len(b); {
		kl := int(b[off])
		if off+1+kl >= len(b) {
			return errTable
		}
		key := string(b[off+1 : off+1+kl])
		off += 1 + kl
		n, _, _, err := skipField(b[off:], maxWalk)
		if err != nil {
			return err
		}
		fn(key, b[off:off+n])
		off += n
	}
	return nil
}
