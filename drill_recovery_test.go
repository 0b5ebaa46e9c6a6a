//go:build drill

// The recovery-gap drill measures how the recovery gap grows with the
// topology: go test -tags drill -run '^TestDrillRecoveryGap' -v . with the
// RabbitMQ of `make services-up` (its env loaded).

package acemq_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// TestDrillRecoveryGap declares n classic queues with one consumer each
// (so 1+5 declarations per queue), closes every connection from the
// broker's side drillRounds times, and logs for each close the recovered
// event's gap (loss noticed → publishing open again, every declaration and
// consumer restored) and how the recovery spent it (the recovered log
// line's connect, redeclare, channels and reattach times); then the median
// gap per size and its growth per queue between the smallest and the
// largest topology. It asserts only that every consumer reads again; the
// numbers are for the reader (docs/operations.md, "Recovery time and topology size").
func TestDrillRecoveryGap(t *testing.T) {
	sizes := []int{10, 50, 200}
	gaps := map[int]time.Duration{}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) { gaps[n] = drillRecoveryGap(t, n) })
	}
	lo, hi := sizes[0], sizes[len(sizes)-1]
	if gaps[lo] > 0 && gaps[hi] > 0 {
		growth := gaps[hi] - gaps[lo]
		t.Logf("growth %d → %d queues: %s in all, %s per queue", lo, hi,
			growth.Round(time.Millisecond), (growth / time.Duration(hi-lo)).Round(10*time.Microsecond))
	}
}

func drillRecoveryGap(t *testing.T, n int) time.Duration {
	rec := &recoveredLine{}
	c, log := rabbit(t, acemq.Config{Logger: slog.New(rec)})
	ctx := context.Background()
	queues := make([]string, n)
	tp := acemq.NewTopology()
	for i := range queues {
		queues[i] = testenv.Unique("gap")
		tp.Queue(queues[i], acemq.QueueOptions{Type: acemq.Classic})
	}
	if err := c.Apply(ctx, tp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var names []string
		for _, q := range queues {
			names = append(names, q, q+".dlq", q+".parked")
		}
		deleteQueues(t, names...)
	})
	var mu sync.Mutex
	got := map[string]bool{}
	all := make(chan struct{})
	start := time.Now()
	for _, q := range queues {
		k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
			mu.Lock()
			got[q] = true
			if len(got) == n {
				close(all)
			}
			mu.Unlock()
			return acemq.Accept()
		}, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
	}
	t.Logf("%d queues: starting %d consumers took %s", n, n, time.Since(start).Round(time.Millisecond))
	var gaps []time.Duration
	for round := 1; round <= drillRounds; round++ {
		from := log.mark()
		testenv.RabbitCtl(t, "close_all_connections", "drill")
		e := log.wait(t, acemq.EventRecovered, from, 60*time.Second)
		t.Logf("%d queues, close %d: recovered event gap %s (attempt %d, %d skipped); %s", n, round, e.Gap.Round(time.Millisecond), e.Attempt, len(e.Skipped), rec.text())
		gaps = append(gaps, e.Gap)
	}
	for _, q := range queues {
		if _, err := acemq.NewPublisher[item](c, "", q, acemq.PublisherConfig{}).Send(ctx, item{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d consumers read again after the recoveries", len(got), n)
	}
	slices.Sort(gaps)
	median := gaps[len(gaps)/2]
	t.Logf("%d queues: median gap %s of %d forced closes", n, median.Round(time.Millisecond), len(gaps))
	return median
}

// drillRounds is how many forced closes each topology size takes; the
// median gap is the one compared (the machine's load makes single runs
// noisy).
const drillRounds = 5

// recoveredLine is a slog handler that keeps the attributes of the last
// "recovered the connection" line, to show where the gap went.
type recoveredLine struct {
	mu   sync.Mutex
	last string
}

func (h *recoveredLine) Enabled(context.Context, slog.Level) bool { return true }
func (h *recoveredLine) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recoveredLine) WithGroup(string) slog.Handler            { return h }

func (h *recoveredLine) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "acemq: recovered the connection to the broker" {
		return nil
	}
	s := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "attempt" || a.Key == "gap" {
			return true
		}
		v := a.Value.Any()
		if d, ok := v.(time.Duration); ok {
			v = d.Round(time.Millisecond)
		}
		s += fmt.Sprintf(" %s=%v", a.Key, v)
		return true
	})
	h.mu.Lock()
	h.last = s
	h.mu.Unlock()
	return nil
}

func (h *recoveredLine) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == "" {
		return "no recovered log line"
	}
	return "recovery:" + h.last
}
