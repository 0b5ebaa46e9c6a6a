package main

import (
	"fmt"
	"sync"
	"time"
)

// journal records what each service saw, keyed by the correlation id read
// off the envelope at that point, so one order's timeline can be rebuilt
// from its correlation id alone. Safe for concurrent use.
type journal struct {
	mu      sync.Mutex
	start   time.Time
	entries []journalEntry
}

type journalEntry struct {
	at   time.Duration
	corr string
	text string
}

func (j *journal) add(corr, format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, journalEntry{at: time.Since(j.start), corr: corr, text: fmt.Sprintf(format, args...)})
}

// timeline returns the entries carrying corr, oldest first.
func (j *journal) timeline(corr string) []journalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []journalEntry
	for _, e := range j.entries {
		if e.corr == corr {
			out = append(out, e)
		}
	}
	return out
}
