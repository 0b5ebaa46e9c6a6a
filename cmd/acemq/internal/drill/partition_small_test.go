package drill

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
)

// The partition drill's parts in the small: what it reads from the
// management API, how it counts duplicates and failures, and its stream
// offset checker. The drill itself needs a cluster in network namespaces
// (make drill-partition).

// fakeNodes serves three nodes' management APIs from canned answers.
func fakeNodes(t *testing.T, answer func(node int, path string) (int, string)) Cluster {
	t.Helper()
	var cl Cluster
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "guest" || p != "pw" {
				http.Error(w, "no credentials", http.StatusUnauthorized)
				return
			}
			code, body := answer(i, r.URL.RequestURI())
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		cl.Management = append(cl.Management, strings.Replace(srv.URL, "http://", "http://guest:pw@", 1)+"/")
	}
	return cl
}

func overview(node int) string { return `{"node":"acemq@pn` + string(rune('1'+node)) + `"}` }

func TestPartitionAPIFindsTheLeaderAndTheClientsNode(t *testing.T) {
	cl := fakeNodes(t, func(node int, path string) (int, string) {
		switch {
		case path == "/api/overview":
			return 200, overview(node)
		case node == 0:
			return 503, "node 1 is cut off"
		case strings.HasPrefix(path, "/api/queues/%2F/drill.q"):
			return 200, `{"leader":"acemq@pn3","online":["acemq@pn2","acemq@pn3"],"members":["acemq@pn1","acemq@pn2","acemq@pn3"]}`
		case path == "/api/connections/username/acemq-partition-a-42":
			return 200, `[{"name":"10.0.0.9:2 -> 10.0.0.2:5672","node":"acemq@pn2","user":"acemq-partition-a-42"}]`
		case strings.HasPrefix(path, "/api/connections/username/"):
			return 200, `[]`
		case strings.HasPrefix(path, "/api/connections"):
			return 200, `[]` // RabbitMQ 4.3 with management_metrics_collection denied
		}
		return 404, "not found"
	})
	ctx := context.Background()
	names, err := cl.nodeNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl.names = names
	leader, online, err := cl.quorumRow(ctx, "drill.q")
	if err != nil || leader != 2 || online != 2 {
		t.Fatalf("quorumRow = leader %d, online %d, %v; want node index 2 (pn3), 2 online, asked past the node that did not answer", leader, online, err)
	}
	n, err := cl.connectedNode(ctx, "acemq-partition-a-42")
	if err != nil || n != 1 {
		t.Fatalf("connectedNode = %d, %v; want 1 (pn2)", n, err)
	}
	if _, err := cl.apiConnectedNode(ctx, "nobody"); err == nil || !strings.Contains(err.Error(), "user nobody") {
		t.Fatalf("connectedNode for a client with no connection: %v, want an error naming it", err)
	}
}

func TestPartitionAPIWholeNamesThePartitionedNode(t *testing.T) {
	cases := []struct {
		name        string
		nodes       string
		queue       string
		ok          bool
		partitioned int
		why         string
		views       []string // per node, when the nodes disagree
		silent      bool     // node 1 does not answer
	}{
		{"whole", `[{"name":"acemq@pn1","running":true,"partitions":[]},{"name":"acemq@pn2","running":true,"partitions":[]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn1","online":["acemq@pn1","acemq@pn2","acemq@pn3"]}`, true, -1, "", nil, false},
		{"a node reports a partition", `[{"name":"acemq@pn1","running":true,"partitions":[]},{"name":"acemq@pn2","running":true,"partitions":["acemq@pn3"]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn1","online":["acemq@pn1","acemq@pn2","acemq@pn3"]}`, false, 1, "reports partitions", nil, false},
		{"a node down", `[{"name":"acemq@pn1","running":true,"partitions":[]},{"name":"acemq@pn2","running":false,"partitions":[]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn1","online":["acemq@pn1","acemq@pn3"]}`, false, -1, "sees 2 running nodes", nil, false},
		{"a member offline", `[{"name":"acemq@pn1","running":true,"partitions":[]},{"name":"acemq@pn2","running":true,"partitions":[]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn1","online":["acemq@pn1","acemq@pn3"]}`, false, -1, "2 members of the quorum queue online", nil, false},
		{"a node on its own side, no partitions listed (RabbitMQ 4)", "", `{"leader":"acemq@pn1","online":["acemq@pn1","acemq@pn2"]}`, false, 2, "node 3 sees 1 running nodes",
			[]string{
				`[{"name":"acemq@pn1","running":true},{"name":"acemq@pn2","running":true},{"name":"acemq@pn3","running":false}]`,
				`[{"name":"acemq@pn1","running":true},{"name":"acemq@pn2","running":true},{"name":"acemq@pn3","running":false}]`,
				`[{"name":"acemq@pn1","running":false},{"name":"acemq@pn2","running":false},{"name":"acemq@pn3","running":true}]`,
			}, false},
		{"a node silent that the others see down (3.10's paused node hung in its restart)", `[{"name":"acemq@pn1","running":false,"partitions":[]},{"name":"acemq@pn2","running":true,"partitions":[]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn2","online":["acemq@pn2","acemq@pn3"]}`, false, 0, "503", nil, true},
		{"a node silent that the others still list as running (seen in the full run)", `[{"name":"acemq@pn1","running":true,"partitions":[]},{"name":"acemq@pn2","running":true,"partitions":[]},{"name":"acemq@pn3","running":true,"partitions":[]}]`,
			`{"leader":"acemq@pn2","online":["acemq@pn1","acemq@pn2","acemq@pn3"]}`, false, 0, "503", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			silent := false // node 1 stops answering once the names are known
			cl := fakeNodes(t, func(node int, path string) (int, string) {
				switch {
				case path == "/api/overview":
					return 200, overview(node)
				case node == 0 && silent && tc.silent:
					return 503, "booting"
				case strings.HasPrefix(path, "/api/nodes") && tc.views != nil:
					return 200, tc.views[node]
				case strings.HasPrefix(path, "/api/nodes"):
					return 200, tc.nodes
				case strings.HasPrefix(path, "/api/queues/"):
					return 200, tc.queue
				}
				return 404, "not found"
			})
			names, err := cl.nodeNames(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cl.names = names
			silent = true
			ok, partitioned, why := cl.whole(context.Background(), "drill.q")
			if ok != tc.ok || partitioned != tc.partitioned || !strings.Contains(why, tc.why) {
				t.Fatalf("whole = %v, %d, %q; want %v, %d, a reason containing %q", ok, partitioned, why, tc.ok, tc.partitioned, tc.why)
			}
		})
	}
}

func TestPartitionAPIRefusedCredentialsAreAnError(t *testing.T) {
	cl := fakeNodes(t, func(int, string) (int, string) { return 200, "{}" })
	cl.Management[0] = strings.Replace(cl.Management[0], "guest:pw@", "guest:wrong@", 1)
	if _, err := cl.nodeNames(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("nodeNames with wrong credentials: %v, want the 401 named", err)
	}
}

func TestPartitionLedgerTellsDuplicatesApartAndListsTheMissing(t *testing.T) {
	l := newPartLedger()
	for _, id := range []string{"a", "b", "c", "d"} {
		l.confirm(id)
	}
	l.resent["b"] = true
	for _, id := range []string{"a", "b", "b", "c", "c", "c"} {
		l.consume(id)
	}
	pub, del := l.dups()
	if pub != 1 || del != 1 {
		t.Fatalf("dups = publish-side %d, delivery-side %d; want 1 (b, resent) and 1 (c, redelivered)", pub, del)
	}
	if got := l.missing(); len(got) != 1 || got[0] != "d" {
		t.Fatalf("missing = %v, want [d]", got)
	}
}

func TestPartitionRecordFailureClassifiesTheError(t *testing.T) {
	ctx := context.Background()
	l := newPartLedger()
	recordFailure(ctx, l, "paused", acemq.ErrPublishingPaused)
	recordFailure(ctx, l, "sent", &acemq.PublishError{Sent: true, Err: errors.New("connection lost")})
	recordFailure(ctx, l, "other", errors.New("something else"))
	if l.refused != 1 || l.failed != 1 {
		t.Fatalf("refused %d, failed %d; want 1 and 1", l.refused, l.failed)
	}
	if l.resent["paused"] || !l.resent["sent"] || !l.resent["other"] {
		t.Fatalf("resent = %v; want the may-have-arrived and the unknown failure, not the refusal", l.resent)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if recordFailure(cctx, l, "late", errors.New("x")) {
		t.Fatal("recordFailure after the context ended said to go on")
	}
}

func TestPartitionStreamTrackCountsSkipsAndRereads(t *testing.T) {
	ctx := context.Background()
	st := &streamTrack{last: -1, led: newPartLedger(), store: &stream.MemoryCheckpoints{}, stream: "s", reader: "r"}
	msg := func(off int64) *stream.Message[partID] {
		return &stream.Message[partID]{Message: &acemq.Message[partID]{Payload: partID{ID: "id"}}, Offset: off}
	}
	for _, off := range []int64{0, 1, 2, 3} {
		st.handle(ctx, msg(off))
	}
	if err := st.store.Save(ctx, "s", "r", 1); err != nil {
		t.Fatal(err)
	}
	st.handle(ctx, msg(3)) // after the checkpoint: allowed
	st.handle(ctx, msg(1)) // at the checkpoint: not
	st.handle(ctx, msg(7)) // 4, 5, 6 skipped
	skipped, reread, early := st.counts()
	if skipped != 3 || reread != 2 || early != 1 {
		t.Fatalf("skipped %d, reread %d, early %d; want 3, 2, 1", skipped, reread, early)
	}
	st2 := &streamTrack{last: -1, led: newPartLedger(), store: &stream.MemoryCheckpoints{}, stream: "s", reader: "r"}
	st2.handle(ctx, msg(2))
	if s, _, _ := st2.counts(); s != 2 {
		t.Fatalf("a reader whose first offset is 2 skipped %d, want 2 (offsets 0 and 1)", s)
	}
}

// The audit re-read tells an id the stream holds (a reader that missed it)
// from one it does not (a write the broker lost).
func TestPartitionAuditStreamFindsWhatTheLogHolds(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://partition-audit", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	const qs = "partition.audit"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(qs, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		t.Fatal(err)
	}
	p := acemq.NewPublisher[partID](c, "", qs, acemq.PublisherConfig{})
	for _, id := range []string{"a", "b", "c"} {
		if _, err := p.SendWith(ctx, partID{ID: id}, acemq.SendOptions{Envelope: &acemq.Envelope{ID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := auditStream(ctx, c, qs, []string{"c", "lost"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !held["c"] || held["lost"] || len(held) != 1 {
		t.Fatalf("audit found %v; want c held and lost not", held)
	}
	held, err = auditStream(ctx, c, qs, []string{"a", "b"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 {
		t.Fatalf("audit found %v; want a and b", held)
	}
}
