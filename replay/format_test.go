package replay

import (
	"testing"
	"time"
)

func TestReplayFormatWritesUTCWithThreeFractionDigits(t *testing.T) {
	tz := time.FixedZone("x", 3600)
	for _, tt := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 2, 3, 4, 5, 6, 789e6, time.UTC), "2026-02-03T04:05:06.789Z"},
		{time.Date(2026, 2, 3, 5, 5, 6, 789999999, tz), "2026-02-03T04:05:06.789Z"},
		{time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC), "2026-02-03T04:05:06.000Z"},
	} {
		if got := formatReplayedAt(tt.in); got != tt.want {
			t.Errorf("formatReplayedAt(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
