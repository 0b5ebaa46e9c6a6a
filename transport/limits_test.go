package transport

import (
	"testing"
	"time"
)

// The check runs on every publish; with an envelope's usual headers it
// must cost little and allocate nothing.
func BenchmarkContentHeaderFrameSize(b *testing.B) {
	p := Properties{ContentType: "application/json", MessageID: "0b5a4c52-7f0e-4c3a-9d7e-5d1c8c1b2a3f", DeliveryMode: 2, Headers: Table{
		"x-acemq-id": "0b5a4c52-7f0e-4c3a-9d7e-5d1c8c1b2a3f", "x-acemq-type": "order.placed", "x-acemq-version": int32(1),
		"x-acemq-attempt": int32(1), "x-acemq-first-seen": time.Now().UnixMilli(), "x-acemq-origin": "svc@host",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-tenant": "acme",
	}}
	b.ReportAllocs()
	for b.Loop() {
		if ContentHeaderFrameSize(&p) < 100 {
			b.Fatal("too small")
		}
	}
}

func TestContentHeaderFrameSizeCountsNestedTablesOfAnyMapType(t *testing.T) {
	type otherTable map[string]any // as a transport's own table type
	p := Properties{Headers: Table{"a": otherTable{"k": "v"}}}
	q := Properties{Headers: Table{"a": Table{"k": "v"}}}
	if ContentHeaderFrameSize(&p) != ContentHeaderFrameSize(&q) {
		t.Fatalf("a nested table of another map type counts %d, a Table %d", ContentHeaderFrameSize(&p), ContentHeaderFrameSize(&q))
	}
}
