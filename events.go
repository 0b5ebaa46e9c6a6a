package acemq

import (
	"sync"
	"time"
)

// EventKind names a connection event.
type EventKind string

// Connection events (behaviour §4.1).
const (
	EventLost      EventKind = "lost"
	EventRetrying  EventKind = "retrying"
	EventRecovered EventKind = "recovered"
	EventGaveUp    EventKind = "gave-up"
	EventBlocked   EventKind = "blocked"
	EventUnblocked EventKind = "unblocked"
)

// Event is a change in a Conn's connection to the broker.
type Event struct {
	Kind EventKind
	At   time.Time
	// Attempt numbers recovery attempts from 1 (retrying, recovered, gave-up).
	Attempt int
	// Err is the cause of a loss or of the last failed attempt.
	Err error
	// Reason is the broker's blocked reason.
	Reason string
	// Gap is how long publishing was unavailable (recovered only).
	Gap time.Duration
	// Skipped lists re-declarations the broker refused during recovery.
	Skipped []error
	// Fields holds the facts of an event raised through Emit by a package
	// over the Conn (see pipeline.EventRunFinished); nil for the Conn's own.
	Fields map[string]string
}

// events hands events to the handler (Config.OnEvent) in order, on one
// goroutine it owns, without bounding (events are rare) and without
// blocking the emitter. A nil *events (no handler) drops every event.
type events struct {
	handler func(Event)
	mu      sync.Mutex
	items   []Event
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

// newEvents starts the dispatcher for handler, or returns nil when there
// is no handler. stop ends the dispatcher and waits for it.
func newEvents(handler func(Event)) *events {
	if handler == nil {
		return nil
	}
	q := &events{handler: handler, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.dispatch()
	return q
}

// emit queues e for the handler. It never blocks: events come from
// transport goroutines (and, on memory://, from inside a publish), which a
// slow handler must not stall.
func (q *events) emit(e Event) {
	if q == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *events) dispatch() {
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, e := range items {
			func() {
				defer func() { _ = recover() }()
				q.handler(e)
			}()
		}
		if closed {
			close(q.done)
			return
		}
		if len(items) == 0 {
			<-q.wake
		}
	}
}

// stop delivers what is queued, then stops the dispatcher and waits for it.
func (q *events) stop() {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}
