package replay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
)

// electionManagement is a management API that answers every queue's
// record as RabbitMQ 4 does during a leader election: the leader on
// record is a node that is not online.
func electionManagement(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"quorum","leader":"rabbit@lost","members":["rabbit@lost","rabbit@b","rabbit@c"],"online":["rabbit@b","rabbit@c"]}`))
	}))
	t.Cleanup(srv.Close)
	return "http://guest:guest@" + strings.TrimPrefix(srv.URL, "http://") + "/"
}

// TestAnUnconfirmedZeroIsNotAnEmptyQueue: the broker answers 0 for a
// quorum queue, as RabbitMQ does for one whose leader is being elected;
// where the management API shows no online leader, Count, Browse and
// Queue say the count is unknown instead of reading an empty queue (a
// replay used to report "moved 0 (drained)"). With the node's own
// management API (its leader online) the same queue counts 0 and drains.
func TestAnUnconfirmedZeroIsNotAnEmptyQueue(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := connect(t, url)
	ctx := context.Background()
	q := testenv.Unique("replay.election")
	dlq := acemq.DeadLetterQueue(q)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum}).Queue(dlq, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{q, dlq} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	})
	electing := replay.ManagementAPI(electionManagement(t), "/")
	var unknown *replay.CountUnknownError

	if n, err := replay.Count(ctx, c, dlq, electing); !errors.As(err, &unknown) {
		t.Errorf("Count during an election: %d, %v; want a *CountUnknownError", n, err)
	}
	read, err := replay.Browse(ctx, c, dlq, 10, func(*acemq.Pulled) bool { return true }, electing)
	if !errors.As(err, &unknown) {
		t.Errorf("Browse during an election: read %d, %v; want a *CountUnknownError", read, err)
	}
	rep, err := replay.Queue(ctx, c, dlq, electing)
	if !errors.As(err, &unknown) || rep.Reason != replay.Failed || rep.Moved != 0 {
		t.Errorf("Queue during an election: %s, %v; want Failed with a *CountUnknownError", rep, err)
	} else if !strings.Contains(err.Error(), "leader is being elected") {
		t.Errorf("the error does not say why: %v", err)
	}

	real := replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/")
	if n, err := replay.Count(ctx, c, dlq, real); err != nil || n != 0 {
		t.Errorf("Count with the leader online: %d, %v; want 0", n, err)
	}
	if rep, err := replay.Queue(ctx, c, dlq, real); err != nil || rep.Reason != replay.Drained {
		t.Errorf("Queue with the leader online: %s, %v; want drained", rep, err)
	}
}
