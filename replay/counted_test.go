package replay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

// TestCountedIsThePassCount: given Counted(n), Browse and Queue take n as
// the messages present at their start instead of counting the queue again
// (the acemq command counts once and hands that answer to its read and its
// replay). On a .dlq of 3 told 2, each examines 2 and leaves the third; a
// negative count is refused before anything is read or moved.
func TestCountedIsThePassCount(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		ctx := context.Background()
		q, ids := setup(t, c, 3)
		dlq := acemq.DeadLetterQueue(q)

		var seen []string
		n, err := replay.Browse(ctx, c, dlq, 10, func(m *acemq.Pulled) bool {
			seen = append(seen, m.Envelope.ID)
			return true
		}, manage(c), replay.Counted(2))
		if err != nil || n != 2 || len(seen) != 2 || seen[0] != ids[0] || seen[1] != ids[1] {
			t.Fatalf("Browse with Counted(2) of a queue of 3: read %d %v (%v); want the first 2", n, seen, err)
		}
		if got := count(t, c, dlq); got != 3 {
			t.Fatalf("Browse left %d messages, want 3", got)
		}

		rep, err := replay.Queue(ctx, c, dlq, manage(c), replay.Counted(2))
		if err != nil || rep.Moved != 2 || rep.Left != 0 || rep.Reason != replay.Drained {
			t.Fatalf("Queue with Counted(2) of a queue of 3: %+v %v; want moved 2, left 0, drained", rep, err)
		}
		if count(t, c, q) != 2 || count(t, c, dlq) != 1 {
			t.Fatalf("after the replay: %d in %s, %d in %s; want 2 and 1", count(t, c, q), q, count(t, c, dlq), dlq)
		}

		var cfg *acemq.ConfigurationError
		if n, err := replay.Browse(ctx, c, dlq, 10, nil, manage(c), replay.Counted(-1)); !errors.As(err, &cfg) || n != 0 {
			t.Fatalf("Browse with Counted(-1): %d, %v; want a *ConfigurationError", n, err)
		}
		if rep, err := replay.Queue(ctx, c, dlq, manage(c), replay.Counted(-1)); !errors.As(err, &cfg) || rep.Moved != 0 {
			t.Fatalf("Queue with Counted(-1): %+v, %v; want a *ConfigurationError", rep, err)
		}
		if got := count(t, c, dlq); got != 1 {
			t.Fatalf("a refused pass changed the queue: %d, want 1", got)
		}
	})
}
