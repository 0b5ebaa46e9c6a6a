package codectest_test

import (
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/codectest"
)

// The JSON codec on the same 1 KiB order, as the baseline of docs/codecs.md's
// Codecs table.
func BenchmarkJSONEncode(b *testing.B) {
	c, o := acemq.JSON(), codectest.SampleOrder()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encode(o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONDecode(b *testing.B) {
	c := acemq.JSON()
	body, _ := c.Encode(codectest.SampleOrder())
	b.ReportAllocs()
	for b.Loop() {
		var o codectest.Order
		if err := c.Decode("application/json", body, &o); err != nil {
			b.Fatal(err)
		}
	}
}
