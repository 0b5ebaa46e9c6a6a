package main

import (
	"math/bits"
	"sync"
	"time"
)

// histogram is a small HDR-style log-linear histogram of durations in
// microseconds: values below 2^subBits are exact, larger ones fall in
// buckets whose width is 1/2^subBits of their magnitude (under 1 % error
// with subBits = 7). Recording is O(1) and allocation-free. Safe for
// concurrent use.
type histogram struct {
	mu     sync.Mutex
	counts []uint64
	total  uint64
	max    int64
}

const (
	subBits  = 7
	subCount = 1 << subBits
)

func newHistogram() *histogram {
	// 64-bit values need (64-subBits+1) bucket groups.
	return &histogram{counts: make([]uint64, (64-subBits+1)*subCount)}
}

func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits - 1
	return (e+1)*subCount + int(v>>e) - subCount
}

// highest is the largest value that falls in bucket i.
func highest(i int) int64 {
	b, s := i/subCount, i%subCount
	if b == 0 {
		return int64(s)
	}
	e := b - 1
	return (int64(subCount+s+1) << e) - 1
}

// Record adds one duration (negative durations count as 0).
func (h *histogram) Record(d time.Duration) {
	v := d.Microseconds()
	if v < 0 {
		v = 0
	}
	h.mu.Lock()
	h.counts[bucketOf(v)]++
	h.total++
	if v > h.max {
		h.max = v
	}
	h.mu.Unlock()
}

// Count is how many values were recorded.
func (h *histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Percentile returns the value at percentile p (0 < p ≤ 100): the highest
// value equivalent to the recorded one at that rank, never above the max.
func (h *histogram) Percentile(p float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total == 0 {
		return 0
	}
	rank := uint64(p / 100 * float64(h.total))
	if float64(rank) < p/100*float64(h.total) {
		rank++
	}
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(highest(i), h.max)) * time.Microsecond
		}
	}
	return time.Duration(h.max) * time.Microsecond
}

// Max is the largest value recorded.
func (h *histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.max) * time.Microsecond
}
