package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"
)

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

// FuzzDecodeHeadersFastAgrees: whatever the one-pass reader of stored
// headers accepts, encoding/json reads the same (same names, same Go
// types and values); what it does not accept goes to encoding/json.
func FuzzDecodeHeadersFastAgrees(f *testing.F) {
	f.Add(`{}`)
	f.Add(` { "a" : "b" , "c":true,"d":false } `)
	f.Add(`{"x-acemq-id":"a","x-acemq-attempt":{"int32":1},"b":true}`)
	f.Add(`{"i":{"int64":-9223372036854775808},"u":{"uint8":255},"z":{"int16":0}}`)
	f.Add(`{"f":{"float64":"NaN"},"g":{"float32":"-Inf"},"h":{"bytes":"AAE="}}`)
	f.Add(`{"t":{"time":"2026-02-03T04:05:06.789Z"},"d":{"decimal":"1.25"}}`)
	f.Add(`{"é":"ü","a":"\u00e9","b":"\n"}`)
	f.Add(`{"x":{"int8":128}}`)
	f.Add(`{"x":{"int32":01}}`)
	f.Add(`{"x":{"int32":1.0}}`)
	f.Add(`{"x":{"int32":1e3}}`)
	f.Add(`{"a":"1","a":{"int8":2}}`)
	f.Add(`{"n":{"table":{"m":{"int8":1}}}}`)
	f.Add(`{"a":true}x`)
	f.Add("{\"a\":\"\xff\"}")
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := decodeHeadersFast(s)
		if !ok {
			return
		}
		slow, err := decodeHeadersJSON(s)
		if err != nil {
			t.Fatalf("the one-pass reader accepted %q, encoding/json refused it: %v", s, err)
		}
		a, errA := encodeHeaders(fast)
		b, errB := encodeHeaders(slow)
		if errA != nil || errB != nil || a != b || len(fast) != len(slow) {
			t.Fatalf("%q read as %q by the one-pass reader and %q by encoding/json (%v, %v)", s, a, b, errA, errB)
		}
		for k, v := range slow {
			if fmt.Sprintf("%T", fast[k]) != fmt.Sprintf("%T", v) {
				t.Fatalf("%q: header %q is %T one way and %T the other", s, k, fast[k], v)
			}
		}
	})
}

// The headers Store.Add writes for a message (the envelope's, and an
// application header of each common type) are read by the one-pass
// reader, not by encoding/json, and decodeHeaders (what relays call)
// takes that path.
func TestStoredHeadersTakeTheFastPath(t *testing.T) {
	b := backendNamed(t, "sqlite")
	s := newStore(t, b)
	c, _ := memConn(t, "orders")
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, tx, c, "", "orders", order{"1", 1}, WithHeader("tenant", "eu-1"), WithHeader("priority-boost", int32(3)),
		WithHeader("seen", time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)), WithHeader("vip", true)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := s.DB().QueryRowContext(ctx, `SELECT headers FROM acemq_outbox`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	h, ok := decodeHeadersFast(text)
	if !ok {
		t.Fatalf("the stored headers %s went to encoding/json", text)
	}
	// decodeHeaders, which relays call, takes that path: it allocates
	// a fraction of what encoding/json does on the same text.
	fast := testing.AllocsPerRun(20, func() { _, _ = decodeHeaders(text) })
	slow := testing.AllocsPerRun(20, func() { _, _ = decodeHeadersJSON(text) })
	if fast*2 > slow {
		t.Fatalf("decodeHeaders made %.0f allocations, encoding/json %.0f: it does not read in one pass", fast, slow)
	}
	want, err := decodeHeadersJSON(text)
	if err != nil || len(h) != len(want) || h["priority-boost"] != int32(3) || h["vip"] != true || len(h) < 8 {
		t.Fatalf("one-pass %v, encoding/json %v (%v)", h, want, err)
	}
}

// BenchmarkDecodeHeaders reads a message's stored headers (what a relay
// does per record), by the one-pass reader and by encoding/json.
func BenchmarkDecodeHeaders(b *testing.B) {
	text := `{"tenant":"eu-1","vip":true,"x-acemq-attempt":{"int32":1},"x-acemq-correlation-id":"0b9f8e0e-7a0b-4c1e-9a55-2f9a1c2b3d4e",` +
		`"x-acemq-first-seen":{"int64":1796198400000},"x-acemq-id":"0b9f8e0e-7a0b-4c1e-9a55-2f9a1c2b3d4e","x-acemq-origin":"shop",` +
		`"x-acemq-type":"orders","x-acemq-version":{"int32":1}}`
	for _, r := range []struct {
		name string
		read func(string) (map[string]any, error)
	}{{"one-pass", decodeHeaders}, {"encoding-json", decodeHeadersJSON}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.read(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
