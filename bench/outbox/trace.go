package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/outbox"
)

// lagTrace is -lag-trace: when each record of the lag run was added,
// committed and received by the lag consumer, and how long each relay
// sweep took, so that a lag tail can be placed in time and set beside the
// producers' commits and the relay's sweeps (and the database's log).
// Records are numbered by order(i); times are Unix nanoseconds, 0 unset.
type lagTrace struct {
	added, committed, received []atomic.Int64

	mu     sync.Mutex
	last   time.Time       // the end of the sweep before
	sweeps []sweepDuration // one per relay sweep
}

type sweepDuration struct {
	end     time.Time
	took    time.Duration
	claimed int
}

func newLagTrace(n int) *lagTrace {
	return &lagTrace{added: make([]atomic.Int64, n), committed: make([]atomic.Int64, n), received: make([]atomic.Int64, n)}
}

// receivedBody notes the time a consumer received the record in body.
func (t *lagTrace) receivedBody(body []byte) {
	var ob orderBody
	var i int
	if json.Unmarshal(body, &ob) != nil {
		return
	}
	if _, err := fmt.Sscanf(ob.ID, "order-%d", &i); err == nil && i >= 0 && i < len(t.received) && t.received[i].Load() == 0 {
		t.received[i].Store(time.Now().UnixNano())
	}
}

// sweep is the relay's observer: a sweep ended now.
func (t *lagTrace) sweep(sw outbox.Sweep) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() {
		t.sweeps = append(t.sweeps, sweepDuration{end: now, took: now.Sub(t.last), claimed: sw.Claimed})
	}
	t.last = now
}

// write prints, per 100 ms of Add times, the windows holding a record
// that took longer than slow from Add to the consumer: how many records,
// how many slow, the longest Add → receive and Add → commit, and the
// longest relay sweep (end to end, including its wait for a wake-up)
// that ended in that window or the next two.
func (t *lagTrace) write(w io.Writer, slow time.Duration) {
	type window struct {
		n, slow         int
		maxLag, maxTx   time.Duration
		maxSweep        time.Duration
		sweepClaimedMax int
	}
	ws := map[int64]*window{}
	for i := range t.added {
		a := t.added[i].Load()
		if a == 0 {
			continue
		}
		k := a / int64(100*time.Millisecond)
		x := ws[k]
		if x == nil {
			x = &window{}
			ws[k] = x
		}
		x.n++
		if c := t.committed[i].Load(); c != 0 {
			x.maxTx = max(x.maxTx, time.Duration(c-a))
		}
		if r := t.received[i].Load(); r != 0 {
			l := time.Duration(r - a)
			x.maxLag = max(x.maxLag, l)
			if l > slow {
				x.slow++
			}
		}
	}
	t.mu.Lock()
	for _, s := range t.sweeps {
		for d := int64(0); d < 3; d++ {
			if x := ws[s.end.UnixNano()/int64(100*time.Millisecond)-d]; x != nil && s.took > x.maxSweep {
				x.maxSweep, x.sweepClaimedMax = s.took, s.claimed
			}
		}
	}
	t.mu.Unlock()
	keys := make([]int64, 0, len(ws))
	for k, x := range ws {
		if x.slow > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	fmt.Fprintf(w, "lag trace: %d of %d windows of 100 ms hold a record slower than %v from Add to the consumer\n", len(keys), len(ws), slow)
	fmt.Fprintln(w, "window (UTC)  records  slow  max add→received  max add→commit  longest sweep ending then (claimed)")
	for _, k := range keys {
		x := ws[k]
		fmt.Fprintf(w, "%s  %7d  %4d  %16v  %14v  %v (%d)\n", time.Unix(0, k*int64(100*time.Millisecond)).UTC().Format("15:04:05.0"),
			x.n, x.slow, x.maxLag.Round(time.Millisecond), x.maxTx.Round(time.Millisecond), x.maxSweep.Round(time.Millisecond), x.sweepClaimedMax)
	}
}
