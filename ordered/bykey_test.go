package ordered_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/ordered"
)

// keyRecorder is what the handlers saw: per key, the sequence numbers in
// the order handled, and whether two handlers of one key ever overlapped.
type keyRecorder struct {
	mu      sync.Mutex
	seen    map[string][]int
	active  map[string]int
	overlap []string
	total   int
}

func (r *keyRecorder) start(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[key]++
	if r.active[key] > 1 {
		r.overlap = append(r.overlap, key)
	}
}

func (r *keyRecorder) end(key string, seq int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[key]--
	r.seen[key] = append(r.seen[key], seq)
	r.total++
}

func (r *keyRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// With concurrency 8 and handlers that take a while, the messages of one
// key never overlap and run in the order sent, on both brokers.
func TestByHeaderKeepsPerKeyOrderUnderConcurrency(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "bykey")
		const keys, perKey = 4, 12
		pub := acemq.NewPublisher[int](c, "", q, acemq.PublisherConfig{})
		for i := 0; i < perKey; i++ {
			for k := 0; k < keys; k++ {
				if _, err := pub.SendWith(ctx, i, acemq.SendOptions{Headers: map[string]any{"key": "k" + strconv.Itoa(k)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := &keyRecorder{seen: map[string][]int{}, active: map[string]int{}}
		k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
			key, _ := m.Envelope.Header("key")
			r.start(key.(string))
			time.Sleep(3 * time.Millisecond) // a slow handler: work, not synchronisation
			r.end(key.(string), m.Payload)
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 48, Concurrency: 8, KeyOrder: ordered.ByHeader("key")})
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "every message handled", func() bool { return r.count() == keys*perKey })
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if len(r.overlap) > 0 {
			t.Fatalf("handlers of one key overlapped: %v", r.overlap)
		}
		for key, got := range r.seen {
			for i, seq := range got {
				if seq != i {
					t.Fatalf("key %s handled in order %v, want 0..%d", key, got, perKey-1)
				}
			}
		}
	})
}

// Different keys run at the same time: the first message of key a waits
// (bounded) until b's first has started. Run one at a time, it would time
// out.
func TestByKeyRunsDifferentKeysInParallel(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "bykey-par")
		// Two keys that land on different workers of 8.
		a, b := "a", ""
		for i := 0; b == ""; i++ {
			if cand := "b" + strconv.Itoa(i); lane(cand, 8) != lane(a, 8) {
				b = cand
			}
		}
		pub := acemq.NewPublisher[string](c, "", q, acemq.PublisherConfig{})
		for _, key := range []string{a, b} {
			if _, err := pub.SendWith(ctx, key, acemq.SendOptions{CorrelationID: key}); err != nil {
				t.Fatal(err)
			}
		}
		bStarted := make(chan struct{})
		overlapped := make(chan bool, 1)
		k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
			switch m.Payload {
			case b:
				close(bStarted)
			case a:
				select {
				case <-bStarted:
					overlapped <- true
				case <-time.After(10 * time.Second):
					overlapped <- false
				}
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Concurrency: 8, KeyOrder: ordered.ByCorrelation()})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(ctx)
		if !<-overlapped {
			t.Fatal("key a's handler never saw key b's start: different keys did not run in parallel")
		}
	})
}

// A panicking key function does not stop the consumer: the delivery runs
// unordered.
func TestByKeyPanickingKeyRunsUnordered(t *testing.T) {
	ctx := context.Background()
	c := brokertest.Connect(t, "memory://bykey-panic")
	q := brokertest.Queue(t, c, "bykey-panic")
	brokertest.Publish(t, c, q, 3)
	var mu sync.Mutex
	n := 0
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[map[string]int]) acemq.Decision {
		mu.Lock()
		n++
		mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 2, KeyOrder: func(acemq.Inbound) string { panic("no key") }})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	brokertest.Eventually(t, "all three handled", func() bool { mu.Lock(); defer mu.Unlock(); return n == 3 })
}

// lane mirrors the consumer's worker choice (FNV-1a modulo n).
func lane(key string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
