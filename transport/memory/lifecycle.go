package memory

import "sync"

// lifecycle is the ended-or-not state shared by connections, channels and
// publishers: a Done channel, the reason, and a once-only end.
type lifecycle struct {
	done chan struct{}
	mu   sync.Mutex
	err  error
	over bool
}

func newLifecycle() lifecycle { return lifecycle{done: make(chan struct{})} }

// begin marks the end with err; only the first caller gets true and must
// clean up and then call finish.
func (l *lifecycle) begin(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return false
	}
	l.over, l.err = true, err
	return true
}

func (l *lifecycle) finish() { close(l.done) }

func (l *lifecycle) ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over
}

func (l *lifecycle) reason() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
