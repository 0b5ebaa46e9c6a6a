package memory

import (
	"sync"
	"sync/atomic"

	"github.com/acemq-go/acemq/transport"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventPublished: a publish reached the broker and is about to be
	// routed, so it is told before any consumer can receive it. Its
	// EventRouted (same Seq) follows. A publish held by Block is told
	// when Unblock routes it.
	EventPublished EventKind = iota + 1
	// EventRouted: where the publish with this Seq went. Queues lists the
	// queues it reached (none: it found no queue, or its exchange does
	// not exist); Nacked says the broker refused it (NackNext, a full
	// reject-publish queue).
	EventRouted
	// EventSettled: a delivery left its consumer (or basic.get's channel):
	// Reason is "ack", "requeue", "reject" (dropped or dead-lettered) or
	// "returned" (its channel ended and the broker took it back).
	EventSettled
	// EventDeadLettered: the broker moved a message out of Queue for
	// Reason ("rejected", "expired", "maxlen") to its dead-letter exchange
	// (Exchange, RoutingKey, Queues), or dropped it (no dead-letter
	// exchange, or one that routes nowhere: Queues empty).
	EventDeadLettered
)

// Event is one thing the broker did, told to the functions given to Watch.
// Properties.Headers and Body are the broker's own copies: read them, do
// not change them.
type Event struct {
	Kind EventKind
	// Seq numbers a publish: its EventPublished and EventRouted carry the
	// same, counting from 1 per broker.
	Seq        uint64
	Exchange   string
	RoutingKey string
	Properties transport.Properties
	Body       []byte
	// Queues are the queues the message reached, in routing order
	// (EventRouted, EventDeadLettered).
	Queues []string
	// Nacked: the broker refused the publish (EventRouted).
	Nacked bool
	// Queue is the queue a settled delivery came from, or the queue a
	// dead letter left.
	Queue  string
	Reason string
}

// watchers is the broker's list of Watch functions, copied on change so
// the broker reads it without a lock.
type watchers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*watcher]
	seq  atomic.Uint64 // numbers publishes while watched
}

type watcher struct{ fn func(Event) }

// Watch calls fn for every publish the broker takes, every delivery
// settled and every message it dead-letters or drops, from the goroutine
// that caused it and in that goroutine's order, until the returned stop is
// called (stop is idempotent and returns once fn is no longer called for
// new events). fn runs with no queue or topology lock held, but possibly
// with a publishing channel's lock held: it must be fast, must not block,
// and must not publish, settle, declare or delete on this broker, nor
// call Snapshot (which takes every publishing channel's lock); it may call
// QueueInfo. A broker nobody watches pays one atomic
// load per publish and settlement. Watch is for tests that need to know
// when the broker moves (acemqtest's Settle, its records of what was
// published); it is safe for concurrent use.
func (b *Broker) Watch(fn func(Event)) (stop func()) {
	w := &watcher{fn: fn}
	b.watch.mu.Lock()
	var next []*watcher
	if old := b.watch.list.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, w)
	b.watch.list.Store(&next)
	b.watch.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.watch.mu.Lock()
			defer b.watch.mu.Unlock()
			old := b.watch.list.Load()
			if old == nil {
				return
			}
			var next []*watcher
			for _, o := range *old {
				if o != w {
					next = append(next, o)
				}
			}
			if len(next) == 0 {
				b.watch.list.Store(nil)
				return
			}
			b.watch.list.Store(&next)
		})
	}
}

// watched reports whether anyone watches the broker.
func (b *Broker) watched() bool { return b.watch.list.Load() != nil }

// emit tells every watcher about e.
func (b *Broker) emit(e Event) {
	ws := b.watch.list.Load()
	if ws == nil {
		return
	}
	for _, w := range *ws {
		w.fn(e)
	}
}

// queueNames returns the names of qs, for an event.
func queueNames(qs []*queue) []string {
	if len(qs) == 0 {
		return nil
	}
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.name
	}
	return out
}
