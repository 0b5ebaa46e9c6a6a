package rabbitmq

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/internal/wire"
)

// headerFrame builds a content header frame on channel 1 whose only
// property is a headers table with the given content.
func headerFrame(table []byte) []byte {
	p := []byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5} // class, weight, body size
	p = binary.BigEndian.AppendUint16(p, propHeaders)
	p = binary.BigEndian.AppendUint32(p, uint32(len(table)))
	p = append(p, table...)
	f := []byte{frameHeaderType, 0, 1}
	f = binary.BigEndian.AppendUint32(f, uint32(len(p)))
	f = append(f, p...)
	return append(f, frameEndOctet)
}

func deepEntry(key string, depth int) []byte {
	inner := wire.AppendLongstr(nil, "leaf", "x")
	for i := 1; i < depth; i++ {
		b := append([]byte{1, 'a', 'F'}, binary.BigEndian.AppendUint32(nil, uint32(len(inner)))...)
		inner = append(b, inner...)
	}
	out := append([]byte{byte(len(key))}, key...)
	out = append(out, 'F')
	out = binary.BigEndian.AppendUint32(out, uint32(len(inner)))
	return append(out, inner...)
}

// headersOf returns the headers table content of a content header frame.
func headersOf(t *testing.T, f []byte) []byte {
	t.Helper()
	if got := int(binary.BigEndian.Uint32(f[3:7])); got != len(f)-8 || f[len(f)-1] != frameEndOctet {
		t.Fatalf("frame size %d for %d bytes, or no frame end", got, len(f)-8)
	}
	start, end, ok := headersSpan(f[7 : len(f)-1])
	if !ok {
		t.Fatal("no headers in the rewritten frame")
	}
	return f[7+start+4 : 7+end]
}

func TestGuardLeavesReadableFramesAlone(t *testing.T) {
	f := headerFrame(append(wire.AppendLongstr(nil, "x-app", "1"), deepEntry("x-ok", 32)...))
	g := &guardedConn{}
	if out := g.check(f); &out[0] != &f[0] || g.rewritten.Load() != 0 {
		t.Fatal("a readable frame was rewritten")
	}
}

func TestGuardDropsTheKeptBytesWhenTheyWouldNotFitTheFrame(t *testing.T) {
	f := headerFrame(append(wire.AppendLongstr(nil, "x-app", "1"), deepEntry("x-deep", 40)...))
	g := &guardedConn{}
	g.maxFrame.Store(uint32(len(f) + 16)) // room for the reason, not for the kept bytes too
	table := headersOf(t, g.check(f))
	got := map[string]bool{}
	var reason string
	if stop := wire.ScanTable(table, func(e wire.Entry) {
		got[string(e.Key)] = true
		if _, over := e.Over(); over {
			t.Fatalf("%s is still over a limit", e.Key)
		}
	}); stop != len(table) {
		t.Fatal("the rewritten headers do not scan")
	}
	h, _ := wire.DecodeTable(table)
	reason, _ = h[wire.UnreadableHeader].(string)
	if !got["x-app"] || got["x-deep"] || got[wire.KeptHeader] || !strings.Contains(reason, "were too large to keep") {
		t.Fatalf("headers %v, reason %q; want x-app kept, x-deep gone and the loss said", got, reason)
	}
}
