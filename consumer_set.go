package acemq

import (
	"sort"
	"sync"
)

// consumerSet is a Conn's running consumers: recovery re-attaches them,
// Close drains them, Health counts them. A consumer joins when it starts
// and leaves when its drain begins. It is safe for concurrent use.
type consumerSet struct {
	mu  sync.Mutex
	set map[*consumerCore]struct{}
}

func (s *consumerSet) add(k *consumerCore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[*consumerCore]struct{}{}
	}
	s.set[k] = struct{}{}
}

func (s *consumerSet) remove(k *consumerCore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, k)
}

// list snapshots the consumers.
func (s *consumerSet) list() []*consumerCore {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*consumerCore, 0, len(s.set))
	for k := range s.set {
		out = append(out, k)
	}
	return out
}

// summary counts the consumers and their deliveries in flight, and lists
// (sorted) the queues of those that stopped reading.
func (s *consumerSet) summary() (count int, inFlight int64, stalled []string) {
	for _, k := range s.list() {
		count++
		inFlight += k.inFlight.Load()
		if k.stalledErr() != nil {
			stalled = append(stalled, k.queue)
		}
	}
	sort.Strings(stalled)
	return count, inFlight, stalled
}
