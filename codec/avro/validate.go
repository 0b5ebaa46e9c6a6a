package avro

import (
	"errors"
	"fmt"

	hamba "github.com/hamba/avro/v2"
)

// validate walks data against schema before anything is decoded, so that
// no length or count in a body is believed beyond the bytes that follow
// it: a string or bytes value longer than the rest of the body, more than
// maxItems array or map items in all, a union or enum index out of range,
// or a value cut short is an error. The walk allocates nothing.
func validate(schema hamba.Schema, data []byte) error {
	v := validator{b: data}
	if err := v.value(schema, 0); err != nil {
		return err
	}
	return nil
}

type validator struct {
	b     []byte
	pos   int
	items int
}

var errShort = errors.New("the body ends in the middle of a value (truncated?)")

const maxNesting = 512

func (v *validator) long() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if v.pos >= len(v.b) {
			return 0, errShort
		}
		c := v.b[v.pos]
		v.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("a variable-length integer is longer than 10 bytes")
}

func (v *validator) skip(n int64, what string) error {
	if n < 0 {
		return fmt.Errorf("a %s has negative length %d", what, n)
	}
	if n > int64(len(v.b)-v.pos) {
		return fmt.Errorf("a %s claims %d bytes but only %d remain", what, n, len(v.b)-v.pos)
	}
	if n > MaxBytes {
		return fmt.Errorf("a %s of %d bytes is longer than the %d the codec reads", what, n, MaxBytes)
	}
	v.pos += int(n)
	return nil
}

func (v *validator) count() (int64, error) {
	n, err := v.long()
	if err != nil || n >= 0 {
		return n, err
	}
	if _, err := v.long(); err != nil { // a negative count is followed by the block's size in bytes
		return 0, err
	}
	if n == -n { // math.MinInt64
		return 0, errors.New("an array or map block count is out of range")
	}
	return -n, nil
}

func (v *validator) block(n int64) error {
	if n > int64(maxItems-v.items) {
		return fmt.Errorf("the body holds more than %d array and map items", maxItems)
	}
	v.items += int(n)
	return nil
}

func (v *validator) value(s hamba.Schema, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("values nest deeper than %d", maxNesting)
	}
	switch s.Type() {
	case hamba.Null:
		return nil
	case hamba.Boolean:
		return v.skip(1, "boolean")
	case hamba.Int, hamba.Long:
		_, err := v.long()
		return err
	case hamba.Float:
		return v.skip(4, "float")
	case hamba.Double:
		return v.skip(8, "double")
	case hamba.String, hamba.Bytes:
		n, err := v.long()
		if err != nil {
			return err
		}
		return v.skip(n, string(s.Type()))
	case hamba.Fixed:
		return v.skip(int64(s.(*hamba.FixedSchema).Size()), "fixed")
	case hamba.Enum:
		i, err := v.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.(*hamba.EnumSchema).Symbols())) {
			return fmt.Errorf("enum index %d is out of range", i)
		}
		return nil
	case hamba.Record, hamba.Error:
		for _, f := range s.(*hamba.RecordSchema).Fields() {
			if err := v.value(f.Type(), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return nil
	case hamba.Ref:
		return v.value(s.(*hamba.RefSchema).Schema(), depth+1)
	case hamba.Union:
		types := s.(*hamba.UnionSchema).Types()
		i, err := v.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(types)) {
			return fmt.Errorf("union index %d is out of range", i)
		}
		return v.value(types[i], depth+1)
	case hamba.Array, hamba.Map:
		for {
			n, err := v.count()
			if err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			if err := v.block(n); err != nil {
				return err
			}
			for range n {
				if s.Type() == hamba.Map {
					k, err := v.long()
					if err != nil {
						return err
					}
					if err := v.skip(k, "map key"); err != nil {
						return err
					}
					if err := v.value(s.(*hamba.MapSchema).Values(), depth+1); err != nil {
						return err
					}
					continue
				}
				if err := v.value(s.(*hamba.ArraySchema).Items(), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("the schema type %s is not supported", s.Type())
}
