package outbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Headers are stored as one JSON object, header name → value, written so
// that reading them back gives the same Go types the library put on the
// wire (an int32 stays an int32): strings and booleans are plain JSON;
// every other value is an object with one key naming its type:
//
//	{"int8":n} {"int16":n} {"int32":n} {"int64":n} {"uint8":n} {"uint16":n}
//	{"uint32":n} {"float32":"f"} {"float64":"f"} {"bytes":"base64"}
//	{"time":"RFC 3339 nanoseconds"} {"table":{...}} {"array":[...]}
//	{"decimal":"text"}
//
// Floats are written as text so NaN and infinities survive.

func encodeHeaders(h map[string]any) (string, error) {
	obj, err := encodeTable(h)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func encodeTable(h map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(h))
	for k, v := range h {
		e, err := encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[k] = e
	}
	return out, nil
}

func tag(name string, v any) map[string]any { return map[string]any{name: v} }

func encodeValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case int8:
		return tag("int8", x), nil
	case int16:
		return tag("int16", x), nil
	case int32:
		return tag("int32", x), nil
	case int:
		return tag("int64", int64(x)), nil
	case int64:
		return tag("int64", x), nil
	case uint8:
		return tag("uint8", x), nil
	case uint16:
		return tag("uint16", x), nil
	case uint32:
		return tag("uint32", x), nil
	case float32:
		return tag("float32", strconv.FormatFloat(float64(x), 'g', -1, 32)), nil
	case float64:
		return tag("float64", strconv.FormatFloat(x, 'g', -1, 64)), nil
	case []byte:
		return tag("bytes", base64.StdEncoding.EncodeToString(x)), nil
	case time.Time:
		return tag("time", x.Format(time.RFC3339Nano)), nil
	case map[string]any:
		t, err := encodeTable(x)
		if err != nil {
			return nil, err
		}
		return tag("table", t), nil
	case []any:
		arr := make([]any, len(x))
		for i, e := range x {
			ev, err := encodeValue(e)
			if err != nil {
				return nil, err
			}
			arr[i] = ev
		}
		return tag("array", arr), nil
	case fmt.Stringer:
		return tag("decimal", x.String()), nil
	}
	return nil, fmt.Errorf("a value of type %T cannot be stored in the outbox; use a string, number, bool, []byte, time.Time, map[string]any or []any", v)
}

// decodeHeaders reads stored headers back (see above): in one pass when
// they have the common form (decodeHeadersFast), else with encoding/json.
func decodeHeaders(s string) (map[string]any, error) {
	if h, ok := decodeHeadersFast(s); ok {
		return h, nil
	}
	return decodeHeadersJSON(s)
}

// decodeHeadersJSON is decodeHeaders with encoding/json: any stored text.
func decodeHeadersJSON(s string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("acemq: the stored headers are not valid JSON: %w", err)
	}
	return decodeTable(raw)
}

func decodeTable(raw map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := decodeValue(raw[k])
		if err != nil {
			return nil, fmt.Errorf("acemq: stored header %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func decodeValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case map[string]any:
		if len(x) != 1 {
			return nil, fmt.Errorf("a typed value has %d keys, want 1", len(x))
		}
		for typ, inner := range x {
			return decodeTyped(typ, inner)
		}
	}
	return nil, fmt.Errorf("unexpected JSON value %v", v)
}

func decodeTyped(typ string, v any) (any, error) {
	num := func(lo, hi int64) (int64, error) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, fmt.Errorf("%s value %v is not a number", typ, v)
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || i < lo || i > hi {
			return 0, fmt.Errorf("%s value %v is out of range", typ, v)
		}
		return i, nil
	}
	str := func() (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s value %v is not a string", typ, v)
		}
		return s, nil
	}
	switch typ {
	case "int8":
		i, err := num(math.MinInt8, math.MaxInt8)
		return int8(i), err
	case "int16":
		i, err := num(math.MinInt16, math.MaxInt16)
		return int16(i), err
	case "int32":
		i, err := num(math.MinInt32, math.MaxInt32)
		return int32(i), err
	case "int64":
		return num(math.MinInt64, math.MaxInt64)
	case "uint8":
		i, err := num(0, math.MaxUint8)
		return uint8(i), err
	case "uint16":
		i, err := num(0, math.MaxUint16)
		return uint16(i), err
	case "uint32":
		i, err := num(0, math.MaxUint32)
		return uint32(i), err
	case "float32", "float64":
		s, err := str()
		if err != nil {
			return nil, err
		}
		bits := 64
		if typ == "float32" {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return nil, err
		}
		if bits == 32 {
			return float32(f), nil
		}
		return f, nil
	case "bytes":
		s, err := str()
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(s)
	case "time":
		s, err := str()
		if err != nil {
			return nil, err
		}
		return time.Parse(time.RFC3339Nano, s)
	case "decimal":
		return str()
	case "table":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("table value %v is not an object", v)
		}
		return decodeTable(m)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("array value %v is not an array", v)
		}
		out := make([]any, len(a))
		for i, e := range a {
			d, err := decodeValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown stored type %q", typ)
}
