package outbox

import "testing"

// FuzzDecodeHeaders feeds arbitrary text to the reader of an outbox
// record's stored headers (what a relay reads back from the database): it
// returns headers or an error, never panics, and whatever it accepts
// encodes back to text that decodes to the same headers.
func FuzzDecodeHeaders(f *testing.F) {
	f.Add(`{}`)
	f.Add(`{"x-acemq-id":"a","x-acemq-attempt":{"int32":1},"b":true}`)
	f.Add(`{"f":{"float64":"NaN"},"g":{"float32":"-Inf"},"h":{"bytes":"AAE="}}`)
	f.Add(`{"t":{"time":"2026-02-03T04:05:06.789Z"},"d":{"decimal":"1.25"}}`)
	f.Add(`{"n":{"table":{"m":{"array":[{"int8":-1},"s",{"uint32":4294967295}]}}}}`)
	f.Add(`{"x":{"int8":128}}`)
	f.Add(`{"x":{"int64":"1"}}`)
	f.Add(`{"x":{"a":1,"b":2}}`)
	f.Add(`[1,2]`)
	f.Add(`null`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := decodeHeaders(s)
		if err != nil {
			return
		}
		once, err := encodeHeaders(h)
		if err != nil {
			t.Fatalf("decoded %q to %#v, which does not encode again: %v", s, h, err)
		}
		back, err := decodeHeaders(once)
		if err != nil {
			t.Fatalf("the re-encoded headers %q do not decode: %v", once, err)
		}
		twice, err := encodeHeaders(back)
		if err != nil || twice != once {
			t.Fatalf("round trip changed the headers: %q then %q (%v)", once, twice, err)
		}
	})
}
