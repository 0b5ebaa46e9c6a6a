package replay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeManagement answers GET /api/queues/%2F/{name}?disable_stats=true with
// body (status 200, or status when not 0) and counts the questions.
func fakeManagement(t *testing.T, status int, body string) (url string, asked *atomic.Int32) {
	t.Helper()
	asked = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.URL.Query().Get("disable_stats") != "true" {
			t.Errorf("the record was asked with statistics (%s), which lag and vanish with a lost node", r.URL)
		}
		if !strings.HasPrefix(r.URL.EscapedPath(), "/api/queues/%2F/") {
			t.Errorf("asked %s", r.URL.EscapedPath())
		}
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return "http://guest:guest@" + strings.TrimPrefix(srv.URL, "http://") + "/", asked
}

// TestAZeroFromAQuorumQueueIsBelievedOnlyWithAnOnlineLeader is the decision
// behind Count: RabbitMQ answers 0 for a quorum queue whose leader on
// record does not answer within 250 ms (a leader election after a node
// loss), so a 0 stands only when the management API's record names a
// leader that is a member and online; then the count is asked again.
func TestAZeroFromAQuorumQueueIsBelievedOnlyWithAnOnlineLeader(t *testing.T) {
	const members = `"members":["rabbit@a","rabbit@b","rabbit@c"]`
	cases := []struct {
		name    string
		status  int
		record  string
		counts  []int // what the broker answers, in turn
		want    int
		unknown string // a part of the error's text; "" when the count stands
		asks    int    // how many times the broker is asked
	}{
		{name: "no leader (RabbitMQ 3.x while the leader's process is gone)", record: `{"type":"quorum","leader":"",` + members + `,"online":["rabbit@b","rabbit@c"]}`,
			counts: []int{0}, unknown: "leader is being elected", asks: 1},
		{name: "the leader on record is offline (RabbitMQ 4.x during the election)", record: `{"type":"quorum","leader":"rabbit@a",` + members + `,"online":["rabbit@b","rabbit@c"]}`,
			counts: []int{0}, unknown: "rabbit@a, is not online", asks: 1},
		{name: "the leader on record is not a member", record: `{"type":"quorum","leader":"rabbit@z",` + members + `,"online":["rabbit@z","rabbit@b"]}`,
			counts: []int{0}, unknown: "not one of its members", asks: 1},
		{name: "no leader field at all", record: `{"type":"quorum",` + members + `}`,
			counts: []int{0}, unknown: "names no leader", asks: 1},
		{name: "a stream without an online leader", record: `{"type":"stream","leader":"rabbit@a",` + members + `,"online":[]}`,
			counts: []int{0}, unknown: "is not online", asks: 1},
		{name: "the management API fails", status: http.StatusServiceUnavailable,
			counts: []int{0}, unknown: "could not be learned", asks: 1},
		{name: "an online leader, still empty", record: `{"type":"quorum","leader":"rabbit@b",` + members + `,"online":["rabbit@b","rabbit@c"]}`,
			counts: []int{0, 0}, want: 0, asks: 2},
		{name: "an online leader, elected between the two questions", record: `{"type":"quorum","leader":"rabbit@b",` + members + `,"online":["rabbit@b","rabbit@c"]}`,
			counts: []int{0, 20}, want: 20, asks: 2},
		{name: "a classic queue's 0 stands", record: `{"type":"classic","node":"rabbit@a"}`,
			counts: []int{0}, want: 0, asks: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mgmt, _ := fakeManagement(t, tc.status, tc.record)
			asks := 0
			ask := func(context.Context) (int, error) {
				n := tc.counts[min(asks, len(tc.counts)-1)]
				asks++
				return n, nil
			}
			n, err := confirmedCount(context.Background(), ask, mgmt, "/", "orders.dlq")
			var u *CountUnknownError
			switch {
			case tc.unknown != "" && !errors.As(err, &u):
				t.Fatalf("count %d, error %v; want a *CountUnknownError (an unconfirmed 0 is not empty)", n, err)
			case tc.unknown != "" && !strings.Contains(err.Error(), tc.unknown):
				t.Fatalf("error %q does not say %q", err, tc.unknown)
			case tc.unknown != "" && !strings.Contains(err.Error(), "count unknown for \"orders.dlq\"") || tc.unknown != "" && !strings.HasSuffix(err.Error(), "; try again"):
				t.Fatalf("error %q does not say the count is unknown and to try again", err)
			case tc.unknown == "" && (err != nil || n != tc.want):
				t.Fatalf("count %d, %v; want %d", n, err, tc.want)
			}
			if asks != tc.asks {
				t.Errorf("the broker was asked %d times, want %d", asks, tc.asks)
			}
		})
	}
}

// TestANonZeroCountCostsNoManagementQuestion: the normal path is one
// passive declare.
func TestANonZeroCountCostsNoManagementQuestion(t *testing.T) {
	mgmt, asked := fakeManagement(t, 0, `{"type":"quorum","leader":""}`)
	n, err := confirmedCount(context.Background(), func(context.Context) (int, error) { return 7, nil }, mgmt, "/", "orders.dlq")
	if err != nil || n != 7 {
		t.Fatalf("count %d, %v; want 7", n, err)
	}
	if asked.Load() != 0 {
		t.Errorf("the management API was asked %d times for a count of 7", asked.Load())
	}
	// Without a management API a 0 is the broker's, as it was.
	if n, err := confirmedCount(context.Background(), func(context.Context) (int, error) { return 0, nil }, "", "/", "orders.dlq"); err != nil || n != 0 {
		t.Fatalf("count %d, %v without a management API; want 0", n, err)
	}
}

// TestAQueueTheManagementAPIDoesNotKnow: a 404 for the record is a queue
// deleted since it was counted (the broker's own 404 is then the answer,
// as for any missing queue), or a management API on another virtual host,
// which confirms nothing.
func TestAQueueTheManagementAPIDoesNotKnow(t *testing.T) {
	mgmt, _ := fakeManagement(t, http.StatusNotFound, "")
	gone := errors.New("acemq: cannot inspect queue \"orders.dlq\": NOT_FOUND")
	asks := 0
	_, err := confirmedCount(context.Background(), func(context.Context) (int, error) {
		if asks++; asks > 1 {
			return 0, gone
		}
		return 0, nil
	}, mgmt, "/", "orders.dlq")
	if !errors.Is(err, gone) {
		t.Fatalf("a queue deleted between the count and the record: %v; want the broker's own answer", err)
	}
	_, err = confirmedCount(context.Background(), func(context.Context) (int, error) { return 0, nil }, mgmt, "/", "orders.dlq")
	var u *CountUnknownError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "virtual host") {
		t.Fatalf("a queue the broker counts 0 and the management API does not know: %v; want a *CountUnknownError naming the virtual host", err)
	}
}
