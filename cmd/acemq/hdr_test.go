package main

import (
	"testing"
	"time"
)

func TestHistogramPercentilesWithinOnePercent(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 100000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		p    float64
		want float64
	}{{50, 50000}, {90, 90000}, {99, 99000}, {99.9, 99900}, {100, 100000}} {
		got := float64(h.Percentile(c.p).Microseconds())
		if got < c.want || got > c.want*1.01 {
			t.Errorf("p%v = %vµs, want within 1%% above %vµs", c.p, got, c.want)
		}
	}
	if h.Max() != 100*time.Millisecond {
		t.Errorf("max = %v, want 100ms", h.Max())
	}
}

func TestHistogramBucketsAreContiguous(t *testing.T) {
	for v := int64(0); v < 1<<16; v++ {
		i := bucketOf(v)
		if v > highest(i) || (i > 0 && v <= highest(i-1)) {
			t.Fatalf("value %d in bucket %d whose range ends at %d (previous ends at %d)", v, i, highest(i), highest(i-1))
		}
	}
}
