package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

// TestAnUnconfirmedZeroIsNotShownAsEmpty: RabbitMQ answers 0 messages for
// a quorum queue whose leader is being elected. The queue here is a real,
// empty quorum .dlq and the console's management API answers as RabbitMQ
// 4 does during the election (the leader on record is not online): the
// overview's row has no depth and says the count is unknown, and the
// queue's page says so (503) instead of showing an empty queue. Before
// replay.Count both showed 0 messages.
func TestAnUnconfirmedZeroIsNotShownAsEmpty(t *testing.T) {
	u := testenv.AMQPURL(t)
	mgmt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"quorum","leader":"rabbit@lost","members":["rabbit@lost","rabbit@b","rabbit@c"],"online":["rabbit@b","rabbit@c"]}`))
	}))
	defer mgmt.Close()
	var names []string
	f := newFixture(t, u, func(c *console.Config) {
		c.ManagementURL = "http://guest:guest@" + strings.TrimPrefix(mgmt.URL, "http://") + "/"
		c.ListQueues = func(context.Context) ([]string, error) { return names, nil }
	})
	q := testenv.Unique("console.election")
	dlq := acemq.DeadLetterQueue(q)
	if err := f.conn.Apply(context.Background(), acemq.NewTopology().Queue(dlq, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.conn.DeleteQueue(context.Background(), dlq) })
	names = []string{dlq}

	row := f.overviewJSON()[dlq]
	if row == nil || row["depth"] != nil || !strings.Contains(row["error"].(string), "count unknown") {
		t.Fatalf("the overview's row for a queue whose count is unknown: %v; want no depth and a count unknown error", row)
	}
	resp, body := f.get("/q/" + url.PathEscape(dlq))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "leader is being elected") {
		t.Fatalf("the queue page: %d %s", resp.StatusCode, firstLine(body, "leader"))
	}
}

// firstLine is the first line of s holding want, or s's start.
func firstLine(s, want string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, want) {
			return l
		}
	}
	return s[:min(len(s), 300)]
}

// TestAQueuePageCountsItsQueueOnce: the queue page counts its queue once
// and the read takes that count (replay.Counted), rather than a second
// count inside replay.Browse: two broker round trips whose answers could
// disagree under load. A 0 is confirmed with the management API, so on an
// empty .dlq each count is one question there, counted by a proxy in
// front of the node's management API. Before the fix the page asked twice.
func TestAQueuePageCountsItsQueueOnce(t *testing.T) {
	u := testenv.AMQPURL(t)
	target, err := url.Parse(mgmtURL(u))
	if err != nil {
		t.Fatal(err)
	}
	target.User = nil
	q := testenv.Unique("console.countonce")
	dlq := acemq.DeadLetterQueue(q)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var asked atomic.Int32
	mgmt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("disable_stats") == "true" && strings.HasSuffix(r.URL.EscapedPath(), "/"+url.PathEscape(dlq)) {
			asked.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer mgmt.Close()
	f := newFixture(t, u, func(c *console.Config) {
		c.ManagementURL = "http://guest:guest@" + strings.TrimPrefix(mgmt.URL, "http://") + "/"
		c.ListQueues = func(context.Context) ([]string, error) { return []string{dlq}, nil }
	})
	if err := f.conn.Apply(context.Background(), acemq.NewTopology().Queue(dlq, acemq.QueueOptions{Type: acemq.Quorum})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = f.conn.DeleteQueue(context.Background(), dlq) })

	resp, body := f.get("/q/" + url.PathEscape(dlq))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the queue page of an empty queue: %d %s", resp.StatusCode, firstLine(body, "error"))
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the queue page counted %s %d times; want once", dlq, n)
	}
}
