package memory

import (
	"sync"
	"sync/atomic"
)

// lifecycle is the ended-or-not state shared by connections, channels and
// publishers: a Done channel, the reason, and a once-only end.
type lifecycle struct {
	done chan struct{}
	over atomic.Bool
	mu   sync.Mutex
	err  error
}

func newLifecycle() lifecycle { return lifecycle{done: make(chan struct{})} }

// begin marks the end with err; only the first caller gets true and must
// clean up and then call finish.
func (l *lifecycle) begin(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over.Load() {
		return false
	}
	l.err = err
	l.over.Store(true)
	return true
}

func (l *lifecycle) finish() { close(l.done) }

func (l *lifecycle) ended() bool { return l.over.Load() }

func (l *lifecycle) reason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
