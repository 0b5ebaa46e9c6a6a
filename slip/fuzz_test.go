package slip

import "testing"

// Parse never panics, and what it accepts writes back into JSON that
// parses to the same itinerary.
func FuzzParse(f *testing.F) {
	f.Add([]byte(contractSlip))
	f.Add([]byte(`{"steps":[{"routingKey":"a"}]}`))
	f.Add([]byte(`{"steps":[{"exchange":"","routingKey":"a","completedAt":"2026-01-01T00:00:00+02:00"}],"done":[]}`))
	f.Add([]byte(`{"steps":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		out, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("an accepted slip does not write back: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("%s (from %q) does not parse back: %v", out, data, err)
		}
		if len(again.Steps) != len(s.Steps) || len(again.Done) != len(s.Done) {
			t.Fatalf("round trip changed the itinerary: %+v -> %+v", s, again)
		}
	})
}
