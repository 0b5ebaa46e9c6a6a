package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress reports how far a long operation has got: a redrawn bar when
// its writer is a terminal, otherwise a plain line at most once a second
// (and one at the end), so logs and pipes stay readable. It is safe for
// concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	label string
	total int64 // 0 when unknown
	done  int64
	start time.Time
	last  time.Time
	ended bool
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress starts reporting on w; total 0 means "unknown".
func newProgress(w io.Writer, label string, total int64) *progress {
	now := time.Now()
	return &progress{w: w, tty: isTerminal(w), label: label, total: total, start: now, last: now}
}

// Add records n more units done.
func (p *progress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	now := time.Now()
	every := time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if now.Sub(p.last) >= every {
		p.last = now
		p.draw(false)
	}
}

// Done draws the final state and ends the line.
func (p *progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	p.draw(true)
}

func (p *progress) draw(final bool) {
	el := time.Since(p.start).Seconds()
	if !p.tty {
		if p.total > 0 {
			fmt.Fprintf(p.w, "%s: %d/%d (%.1fs)\n", p.label, p.done, p.total, el)
		} else {
			fmt.Fprintf(p.w, "%s: %d (%.1fs)\n", p.label, p.done, el)
		}
		return
	}
	const width = 30
	if p.total > 0 {
		n := int(float64(width) * float64(min(p.done, p.total)) / float64(p.total))
		bar := strings.Repeat("#", n) + strings.Repeat("-", width-n)
		fmt.Fprintf(p.w, "\r%s [%s] %d/%d %.1fs", p.label, bar, p.done, p.total, el)
	} else {
		fmt.Fprintf(p.w, "\r%s %d %.1fs", p.label, p.done, el)
	}
	if final {
		fmt.Fprintln(p.w)
	}
}
