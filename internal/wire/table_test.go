package wire

import (
	"encoding/binary"
	"testing"
)

// table encodes entries key -> longstr, for seeds.
func nestedBytes(depth int) []byte {
	inner := AppendLongstr(nil, "leaf", "x")
	for i := 1; i < depth; i++ {
		var b []byte
		b = append(b, 1, 'a', 'F')
		b = binary.BigEndian.AppendUint32(b, uint32(len(inner)))
		inner = append(b, inner...)
	}
	out := append([]byte{6}, "x-deep"...)
	out = append(out, 'F')
	out = binary.BigEndian.AppendUint32(out, uint32(len(inner)))
	return append(out, inner...)
}

func TestScanTableMeasuresDepthAsTheClientCounts(t *testing.T) {
	for _, tc := range []struct {
		depth int
		over  bool
	}{{32, false}, {33, true}, {40, true}} {
		var got Entry
		if stop := ScanTable(nestedBytes(tc.depth), func(e Entry) { got = e }); stop != len(nestedBytes(tc.depth)) {
			t.Fatalf("depth %d: stopped at %d", tc.depth, stop)
		}
		if _, over := got.Over(); over != tc.over || got.Depth != tc.depth {
			t.Fatalf("depth %d: entry depth %d over %v, want over %v", tc.depth, got.Depth, over, tc.over)
		}
	}
}

func TestCheckHeadersNamesTheHeaderAndTheLimit(t *testing.T) {
	deep := map[string]any{"leaf": 1}
	for i := 1; i < 33; i++ {
		deep = map[string]any{"a": deep}
	}
	l, over := CheckHeaders(map[string]any{"x-ok": "v", "x-deep": deep}, nil)
	if !over || l.String() != `header "x-deep" nests tables or arrays 33 levels deep, over the limit of 32` {
		t.Fatalf("got %q %v", l.String(), over)
	}
	if _, over := CheckHeaders(map[string]any{"x-ok": deep["a"]}, nil); over {
		t.Fatal("a 32-deep header was refused")
	}
	wide := make([]any, MaxEntries+1)
	if l, over := CheckHeaders(map[string]any{"x-list": map[string]any{"b": wide}}, nil); !over || l.String() != `header "x-list.b" holds 8193 entries, over the limit of 8192 per table or array` {
		t.Fatalf("got %q %v", l.String(), over)
	}
}

// FuzzDecodeTable: no input panics ScanTable or DecodeTable, and the two
// agree on where a readable table ends.
func FuzzDecodeTable(f *testing.F) {
	f.Add(nestedBytes(3))
	f.Add(nestedBytes(40))
	f.Add(AppendBytes(AppendLongstr(nil, "a", "b"), "c", []byte{1, 2}))
	f.Add([]byte{1, 'k', 'A', 0, 0, 0, 2, 'V', 'V'})
	f.Fuzz(func(t *testing.T, b []byte) {
		stop := ScanTable(b, nil)
		_, err := DecodeTable(b)
		if (err == nil) != (stop == len(b)) {
			t.Fatalf("DecodeTable err %v but ScanTable stopped at %d of %d", err, stop, len(b))
		}
	})
}
