package acemq

import (
	"testing"
	"time"
)

// A back-off wait lies between half the step and the step, whatever the
// draw, so no wait is longer than the documented interval.
func TestJitterStaysBetweenHalfTheStepAndTheStep(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, time.Second, 30 * time.Second} {
		for _, u := range []float64{0, 0.25, 0.5, 0.999999} {
			if got := jitterAt(d, u); got < d/2 || got > d {
				t.Errorf("jitterAt(%s, %v) = %s, outside [%s, %s]", d, u, got, d/2, d)
			}
		}
		if got := jitterAt(d, 0); got != d/2 {
			t.Errorf("jitterAt(%s, 0) = %s, want %s", d, got, d/2)
		}
	}
}

// The waits are drawn: a fleet's clients do not all wait the same time.
func TestJitterDraws(t *testing.T) {
	const d = time.Second
	seen := map[time.Duration]bool{}
	for range 100 {
		w := jitter(d)
		if w < d/2 || w > d {
			t.Fatalf("jitter(%s) = %s, outside [%s, %s]", d, w, d/2, d)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 draws of jitter(%s) gave %d different waits", d, len(seen))
	}
	for range 100 {
		if w := probeWait(); w < probeEvery/2 || w >= probeEvery*3/2 {
			t.Fatalf("probeWait() = %s, outside [%s, %s)", w, probeEvery/2, probeEvery*3/2)
		}
		if w := spreadWait(); w < 0 || w >= reconnectSpread {
			t.Fatalf("spreadWait() = %s, outside [0, %s)", w, reconnectSpread)
		}
	}
}

// After a restart, the jitter adds at most a knock and the spread to the
// time from the broker listening to the reconnection attempt: 230 ms,
// which keeps the restart drill's gap (about 0.4 s to a quorum queue,
// the broker's own queue recovery) under 1 s.
func TestTheJitterAfterARestartAddsAtMost230ms(t *testing.T) {
	worst := probeWaitAt(0.999999) + spreadWaitAt(0.999999)
	if worst > 230*time.Millisecond {
		t.Fatalf("a knock and the spread can add %s after the broker listens, over 230ms", worst)
	}
	if probeWaitAt(0) != probeEvery/2 || spreadWaitAt(0) != 0 {
		t.Fatalf("the shortest knock %s and spread %s, want %s and 0", probeWaitAt(0), spreadWaitAt(0), probeEvery/2)
	}
}
