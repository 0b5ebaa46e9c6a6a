package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// electingManagement is a management API that lists listed (0 messages
// each), answers every queue's record as RabbitMQ 4 does during a leader
// election (the leader on record is not online), and 404 to everything
// else.
func electingManagement(t *testing.T, listed ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch p := r.URL.EscapedPath(); {
		case p == "/api/queues/%2F":
			rows := []map[string]any{}
			for _, q := range listed {
				rows = append(rows, map[string]any{"name": q, "messages": 0})
			}
			_ = json.NewEncoder(w).Encode(rows)
		case strings.HasPrefix(p, "/api/queues/%2F/"):
			_, _ = w.Write([]byte(`{"type":"quorum","leader":"rabbit@lost","members":["rabbit@lost","rabbit@b","rabbit@c"],"online":["rabbit@b","rabbit@c"]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return "http://guest:guest@" + strings.TrimPrefix(srv.URL, "http://") + "/"
}

// TestPurgeAndTailNeverTakeAnUnconfirmedZeroForEmpty: RabbitMQ answers 0
// messages for a quorum queue whose leader is being elected. The queue
// here is a real, empty quorum .dlq and the management API the commands
// are given answers as RabbitMQ 4 does during the election. dlq purge
// must delete nothing and say the count is unknown, with or without --yes
// (not "would delete the 0 message(s)", not "purged 0"); tail must warn
// with the same sentence and, having printed nothing, exit 1 rather than
// 0. With the node's own management API the queue is empty and both say
// so as before. Before the fix purge and tail counted without the
// management API: purge printed "purged 0 message(s)" and tail exited 0.
func TestPurgeAndTailNeverTakeAnUnconfirmedZeroForEmpty(t *testing.T) {
	amqpURL := testenv.AMQPURL(t)
	c := libConn(t, amqpURL)
	q := testenv.Unique("cli.election.purge")
	dlq := q + ".dlq"
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum}).Queue(dlq, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	deleteQueues(t, c, q, dlq)
	electing := electingManagement(t)

	for _, yes := range [][]string{nil, {"--yes"}} {
		args := append([]string{"dlq", "purge", dlq, "--url", amqpURL, "--management-url", electing}, yes...)
		r := acemqCmd(t, "", args...)
		mustFailWithSentence(t, r, "nothing was purged from "+dlq+": count unknown for \""+dlq+"\": the queue's leader is being elected", args...)
		if strings.Contains(r.stdout+r.stderr, "purged 0") || strings.Contains(r.stderr, "would delete") {
			t.Fatalf("acemq %s claims a count it could not confirm:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}

	args := []string{"tail", dlq, "--ack", "-n", "1", "--for", "1s", "--url", amqpURL, "--management-url", electing}
	r := acemqCmd(t, "", args...)
	mustFailWithSentence(t, r, "tail printed no message from "+dlq+", which does not show it empty: count unknown for \""+dlq+"\"", args...)
	if !strings.Contains(r.stderr, "warning: count unknown for \""+dlq+"\": the queue's leader is being elected") || r.stdout != "" {
		t.Fatalf("tail during an election: stdout %q, stderr:\n%s", r.stdout, r.stderr)
	}

	// With the node's own management API (its leader online) the queue
	// is empty, and the commands say so.
	mgmt := testManagementURL(t)
	r = run0(t, "", "dlq", "purge", dlq, "--yes", "--url", amqpURL, "--management-url", mgmt)
	if !strings.Contains(r.stdout, "purged 0 message(s) from "+dlq) {
		t.Fatalf("dlq purge of an empty queue with its leader online: %s", r.stdout)
	}
	r = run0(t, "", "tail", dlq, "--ack", "-n", "1", "--for", "1s", "--url", amqpURL, "--management-url", mgmt)
	if r.stdout != "" || strings.Contains(r.stderr, "count unknown") {
		t.Fatalf("tail of an empty queue with its leader online: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// countingManagement forwards to the test node's management API and
// counts the questions replay.Count asks about queue (its record with
// statistics off), one for each count of queue that came out 0.
func countingManagement(t *testing.T, queue string) (string, *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(testManagementURL(t))
	if err != nil {
		t.Fatal(err)
	}
	target.User = nil
	proxy := httputil.NewSingleHostReverseProxy(target)
	asked := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("disable_stats") == "true" && strings.HasSuffix(r.URL.EscapedPath(), "/"+url.PathEscape(queue)) {
			asked.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return "http://guest:guest@" + strings.TrimPrefix(srv.URL, "http://") + "/", asked
}

// TestDLQShowAndReplayCountTheQueueOnce: each command counts its queue
// once and uses that answer throughout (replay.Counted), rather than one
// count for its own checks and another inside the read or the replay (two
// broker round trips, and under load two answers that disagree). A count
// of 0 is confirmed with the management API, so on an empty .dlq each
// count is one question there. Before the fix dlq show asked twice and dlq
// replay four times (its duplicate check's two, its own, the pass's).
func TestDLQShowAndReplayCountTheQueueOnce(t *testing.T) {
	amqpURL := testenv.AMQPURL(t)
	c := libConn(t, amqpURL)
	q := testenv.Unique("cli.countonce")
	seedDLQ(t, c, q, 0)
	dlq := q + ".dlq"
	mgmt, asked := countingManagement(t, dlq)

	r := run0(t, "", "dlq", "show", dlq, "--url", amqpURL, "--management-url", mgmt)
	if !strings.Contains(r.stdout, dlq+" is empty") {
		t.Fatalf("dlq show of an empty queue: %s", r.stdout)
	}
	if n := asked.Swap(0); n != 1 {
		t.Errorf("dlq show counted %s %d times; want once", dlq, n)
	}
	r = run0(t, "", "dlq", "replay", dlq, "--url", amqpURL, "--management-url", mgmt)
	if !strings.Contains(r.stdout, "moved 0, skipped 0 (drained)") {
		t.Fatalf("dlq replay of an empty queue: %s", r.stdout)
	}
	if n := asked.Swap(0); n != 1 {
		t.Errorf("dlq replay counted %s %d times; want once", dlq, n)
	}
}
