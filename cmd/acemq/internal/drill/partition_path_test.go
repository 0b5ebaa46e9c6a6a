package drill

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// runPaths runs both layouts' path workloads on a memory:// broker for
// about d and settles them; tamper, when set, runs before they are
// counted.
func runPaths(t *testing.T, d time.Duration, tamper func(pr *pathRun)) *Result {
	t.Helper()
	name := fmt.Sprintf("drill-path-%d", time.Now().UnixNano())
	t.Cleanup(func() { memory.Delete(name) })
	ctx := context.Background()
	pr, err := startPaths(ctx, "memory://"+name, nil, PartitionOptions{Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close(ctx)
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	pr.publish(run, &wg, 2*time.Millisecond)
	_ = sleepCtx(ctx, d) // the publishers' running time, not a synchronisation
	stop()
	wg.Wait()
	for _, w := range pr.loads {
		w.settle(ctx, 5*time.Second)
	}
	if tamper != nil {
		tamper(pr)
	}
	r := newResult("partition")
	pr.finish(ctx, Cluster{}, r)
	return r
}

func TestPartitionPathCountsEveryMessageOnBothLayouts(t *testing.T) {
	r := runPaths(t, 500*time.Millisecond, nil)
	if !r.OK() {
		t.Fatal(r.Line())
	}
	// The wait was held on a rung: a consumer-held wait would not show
	// the layouts apart.
	for _, l := range []string{"classic", "replicated"} {
		if got := r.Get(l + "_rung_waits"); got == "0" || got == "" {
			t.Errorf("%s: %q waits held on the rung: %s", l, got, r.Line())
		}
	}
	for _, l := range []string{"classic", "replicated"} {
		if r.Get(l+"_path_confirmed") == "0" || r.Get(l+"_wait") == "0/0" || r.Get(l+"_dlq") == "0/0" {
			t.Errorf("%s: nothing went down the path: %s", l, r.Line())
		}
		for _, k := range []string{"_path_unhandled", "_path_dup"} {
			if r.Get(l+k) != "0" {
				t.Errorf("%s%s = %s on an undisturbed broker: %s", l, k, r.Get(l+k), r.Line())
			}
		}
	}
}

// TestPartitionPathSeesALossInADeadLetterQueue purges each layout's .dlq
// before the count: the replicated layout's loss fails the drill, the
// classic layout's is reported.
func TestPartitionPathSeesALossInADeadLetterQueue(t *testing.T) {
	purged := map[acemq.Layout]int{}
	r := runPaths(t, 300*time.Millisecond, func(pr *pathRun) {
		for _, w := range pr.loads {
			n, err := w.conn.PurgeQueue(context.Background(), acemq.DeadLetterQueue(w.queue))
			if err != nil {
				t.Fatal(err)
			}
			purged[w.layout] = n
		}
	})
	if r.OK() {
		t.Fatalf("the drill passed after the replicated .dlq lost %d messages: %s", purged[acemq.ReplicatedLayout], r.Line())
	}
	for _, l := range []acemq.Layout{acemq.ClassicLayout, acemq.ReplicatedLayout} {
		var entered, lost int
		if _, err := fmt.Sscanf(r.Get(string(l)+"_dlq"), "%d/%d", &entered, &lost); err != nil || lost != purged[l] || lost == 0 {
			t.Errorf("%s: dlq %q, want %d lost: %s", l, r.Get(string(l)+"_dlq"), purged[l], r.Line())
		}
	}
}
