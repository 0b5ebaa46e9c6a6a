package memory

import (
	"sort"
	"time"
)

// Snapshot is the broker's state at one instant: what it holds and what it
// owes, for a test waiting for it to go quiet (acemqtest's Settle).
type Snapshot struct {
	// Queues holds every queue, sorted by name.
	Queues []QueueState
	// Connections is how many connections are open.
	Connections int
	// Blocked is true while a Block alarm is on.
	Blocked bool
	// Held counts publishes held by the alarm: taken, neither routed nor
	// confirmed until Unblock.
	Held int
	// Withheld counts answers (confirms, nacks, returns) withheld by
	// StopConfirming until ResumeConfirming.
	Withheld int
}

// QueueState is one queue in a Snapshot.
type QueueState struct {
	Name string
	// Ready counts messages waiting to be delivered; on a stream, the
	// messages its consumers have not been handed yet (summed over them).
	Ready int
	// Unacked counts messages handed to a consumer (or on their way to
	// it) or taken with basic.get, and not settled yet.
	Unacked int
	// Consumers counts subscriptions; Credit is how many of them could
	// take another message now (prefetch not used up).
	Consumers int
	Credit    int
	// TTL is the queue's x-message-ttl; Expires is false when it has
	// none. DeadLetterExchange is its x-dead-letter-exchange ("" when
	// HasDeadLetterExchange is false: expired messages are dropped).
	TTL                   time.Duration
	Expires               bool
	DeadLetterExchange    string
	HasDeadLetterExchange bool
	Stream                bool
}

// Snapshot returns the broker's state. Each queue is read under its own
// lock, so a broker in motion may show a message in two places or in none;
// a quiet broker's snapshot is exact. Safe for concurrent use.
func (b *Broker) Snapshot() Snapshot {
	b.mu.RLock()
	qs := make([]*queue, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	s := Snapshot{Queues: make([]QueueState, 0, len(qs)), Blocked: b.blocked.Load()}
	for _, q := range qs {
		s.Queues = append(s.Queues, q.state())
	}
	sort.Slice(s.Queues, func(i, j int) bool { return s.Queues[i].Name < s.Queues[j].Name })
	conns := b.snapshotConns()
	s.Connections = len(conns)
	for _, c := range conns {
		for _, p := range c.publishers() {
			p.mu.Lock()
			s.Held += len(p.held)
			s.Withheld += len(p.withheld)
			p.mu.Unlock()
		}
	}
	return s
}

func (q *queue) state() QueueState {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueState{
		Name: q.name, Consumers: len(q.consumers), Unacked: q.unacked,
		DeadLetterExchange: q.dlx, HasDeadLetterExchange: q.hasDLX, Stream: q.stream != nil,
	}
	if q.ttl >= 0 {
		st.TTL, st.Expires = time.Duration(q.ttl), true
	}
	for _, c := range q.consumers {
		if c.prefetch == 0 || c.inflight < c.prefetch {
			st.Credit++
		}
		if q.stream != nil && c.cursor < q.stream.end() {
			st.Ready += int(q.stream.end() - max(c.cursor, q.stream.first))
		}
	}
	if q.stream == nil {
		st.Ready = q.ready.len()
	}
	return st
}
