//go:build drill

// The recovery-gap drill measures how the recovery gap grows with the
// topology: `make drill-recovery` (or go test -tags drill -run
// '^TestDrillRecoveryGap' -v .) with the RabbitMQ of `make services-up`.

package acemq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// TestDrillRecoveryGap declares n classic queues with one consumer each,
// closes every connection from the broker's side, and logs the recovered
// event's gap (loss noticed → publishing open again, every declaration and
// consumer restored) and how long starting the consumers took. It asserts
// only that every consumer reads again; the numbers are for the reader.
func TestDrillRecoveryGap(t *testing.T) {
	for _, n := range []int{10, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { drillRecoveryGap(t, n) })
	}
}

func drillRecoveryGap(t *testing.T, n int) {
	c, log := rabbit(t)
	ctx := context.Background()
	queues := make([]string, n)
	tp := acemq.NewTopology()
	for i := range queues {
		queues[i] = testenv.Unique("gap")
		tp.Queue(queues[i], acemq.AsClassic())
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
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
	}
	t.Logf("%d queues: starting %d consumers took %s", n, n, time.Since(start).Round(time.Millisecond))
	from := log.mark()
	testenv.RabbitCtl(t, "close_all_connections", "drill")
	e := log.wait(t, acemq.EventRecovered, from, 60*time.Second)
	t.Logf("%d queues: recovered event gap %s (attempt %d, %d skipped)", n, e.Gap.Round(time.Millisecond), e.Attempt, len(e.Skipped))
	for _, q := range queues {
		if _, err := acemq.NewPublisher[item](c, "", q).Send(ctx, item{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d consumers read again after the recovery", len(got), n)
	}
}
