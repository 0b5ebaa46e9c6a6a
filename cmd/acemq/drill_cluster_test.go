//go:build drill

// The dead-letter half of the cluster drill needs three RabbitMQ nodes:
// `make drill-cluster` starts them and runs it after the root package's.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// clusterNode is one node of the drill's cluster: its AMQP and management
// URLs and its rabbitmqctl wrapper.
type clusterNode struct {
	amqp, mgmt, ctl string
}

// drillCluster reads the 3-node cluster `make drill-cluster` started. The
// management port of nodes 2 and 3 is in a file beside their rabbitmqctl
// wrapper (scripts/rabbitmq.sh).
func drillCluster(t *testing.T) []clusterNode {
	t.Helper()
	raw := os.Getenv("ACEMQ_TEST_AMQP_URLS")
	if raw == "" {
		t.Skip("the cluster drill runs under `make drill-cluster`, which starts a 3-node cluster for it")
	}
	var nodes []clusterNode
	for i, u := range strings.Split(raw, ",") {
		n := clusterNode{amqp: strings.TrimSpace(u)}
		if i == 0 {
			n.ctl, n.mgmt = os.Getenv("ACEMQ_TEST_RABBITMQCTL"), os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")
		} else {
			n.ctl = os.Getenv(fmt.Sprintf("ACEMQ_TEST_RABBITMQCTL_%d", i+1))
			port, err := os.ReadFile(filepath.Join(filepath.Dir(n.ctl), "mgmt_port"))
			if err != nil {
				t.Fatalf("node %d's management port: %v", i+1, err)
			}
			n.mgmt = "http://guest:guest@127.0.0.1:" + strings.TrimSpace(string(port)) + "/"
		}
		if n.ctl == "" || n.mgmt == "" {
			t.Fatalf("node %d: no rabbitmqctl or management URL in the environment; `make drill-cluster` sets them", i+1)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) != 3 {
		t.Fatalf("the drill wants 3 nodes, the environment lists %d", len(nodes))
	}
	return nodes
}

func (n clusterNode) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.ctl, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// queueNode asks node via's management API which node holds queue: a
// classic queue's node, a quorum queue's leader.
func queueNode(via clusterNode, queue string) (string, error) {
	u, err := url.Parse(via.mgmt)
	if err != nil {
		return "", err
	}
	pass, _ := u.User.Password()
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(u.Scheme+"://"+u.Host, "/")+"/api/queues/%2F/"+url.PathEscape(queue), nil)
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(u.User.Username(), pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var q struct {
		Node   string `json:"node"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		return "", fmt.Errorf("queue %s: %v", queue, err)
	}
	if q.Leader != "" {
		return q.Leader, nil
	}
	return q.Node, nil
}

// nodeName is node n's Erlang name.
func (n clusterNode) nodeName(t *testing.T) string {
	t.Helper()
	out, err := n.run("eval", "node().")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(strings.TrimSpace(out), "'")
}

// TestClusterDeadLettersSurviveTheLossOfTheirNode sets 30 messages aside
// (20 to {q}.dlq, 10 to {q}.parked) in each layout, stops the node that
// holds {q}.dlq (a classic queue's node, a quorum queue's leader) and asks
// a surviving node: acemq dlq list must list every dead letter, the
// console must show each of them and acemq dlq replay must bring them all
// back to {q}. The replicated layout must do all three; the classic
// layout's answer is logged (its .dlq lives on the stopped node only).
func TestClusterDeadLettersSurviveTheLossOfTheirNode(t *testing.T) {
	nodes := drillCluster(t)
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.nodeName(t)
	}
	for _, layout := range []acemq.Layout{acemq.ReplicatedLayout, acemq.ClassicLayout} {
		t.Run(string(layout), func(t *testing.T) {
			res := deadLettersAfterNodeLoss(t, nodes, names, layout)
			t.Logf("%s layout, the node holding %s stopped: %s", layout, res.dlq, res)
			if layout == acemq.ReplicatedLayout && !res.all() {
				t.Errorf("the replicated layout: %s", res)
			}
		})
	}
}

type nodeLossResult struct {
	dlq                       string
	setAside                  int
	listed, shown, replayed   int
	listErr, showErr, playErr string
}

func (r nodeLossResult) all() bool {
	return r.listed == 20 && r.shown == 20 && r.replayed == 20
}

func (r nodeLossResult) String() string {
	s := fmt.Sprintf("dlq list %d of 20, console %d of 20, replayed %d of 20", r.listed, r.shown, r.replayed)
	for _, e := range []string{r.listErr, r.showErr, r.playErr} {
		if e != "" {
			s += "; " + e
		}
	}
	return s
}

func deadLettersAfterNodeLoss(t *testing.T, nodes []clusterNode, names []string, layout acemq.Layout) nodeLossResult {
	ctx := context.Background()
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		u, _ := url.Parse(n.amqp)
		addrs[i] = u.Host
	}
	c, err := acemq.Connect(ctx, nodes[0].amqp, acemq.Config{Addresses: addrs, Layout: layout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	q := fmt.Sprintf("drill.nodeloss.%s.%d", layout, time.Now().UnixNano()%1e9)
	res := nodeLossResult{dlq: q + ".dlq"}
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	setAside := map[string]bool{}
	done := make(chan struct{})
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		mu.Lock()
		defer mu.Unlock()
		setAside[m.Payload] = true
		if len(setAside) == 30 {
			close(done)
		}
		if strings.HasPrefix(m.Payload, "park-") {
			return acemq.Park(errors.New("for a person"))
		}
		return acemq.Reject(errors.New("the drill's dead letter"))
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := acemq.NewPublisher[string](c, "", q, acemq.PublisherConfig{})
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("dead-%02d", i) // no id inside another, for the page check
		if i >= 20 {
			id = fmt.Sprintf("park-%02d", i)
		}
		ids = append(ids, id)
		if _, err := p.SendWith(ctx, id, acemq.SendOptions{Envelope: &acemq.Envelope{ID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the consumer set aside %d of 30", len(setAside))
	}
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := c.QueueInfo(ctx, res.dlq)
		if err == nil && info.Messages == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d, want 20 (%v)", res.dlq, info.Messages, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the broker's count
	}
	res.setAside = 30

	holder, err := queueNode(nodes[0], res.dlq)
	if err != nil {
		t.Fatal(err)
	}
	stopped := -1
	for i, n := range names {
		if n == holder {
			stopped = i
		}
	}
	if stopped < 0 {
		t.Fatalf("%s is on %q, which is none of %v", res.dlq, holder, names)
	}
	alive := nodes[(stopped+1)%3]
	t.Logf("%s is held by node %d (%s); stopping it, asking node %d", res.dlq, stopped+1, holder, (stopped+1)%3+1)
	// A quorum queue's count comes from its leader: RabbitMQ answers 0
	// messages when the leader it has on record does not answer within
	// 250 ms (rabbit_quorum_queue:stat: "Leader is not available"), so
	// until the survivors have elected one, queue.declare counts the queue
	// empty (one run on RabbitMQ 4.3.6 that asked at once saw 0 of 20 in
	// list, console and replay alike). The tools confirm a 0 with the
	// management API (replay.Count): asked again and again from before
	// the stop until a surviving node leads the .dlq, dlq list must never
	// print 0 for it: either 20, or "count unknown" and a non-zero exit.
	stopWatch := make(chan struct{})
	endWatch := sync.OnceFunc(func() { close(stopWatch) })
	watched := make(chan listWatch, 1)
	if layout == acemq.ReplicatedLayout {
		go func() { watched <- watchList(stopWatch, alive, res.dlq, 20) }()
		defer func() { endWatch(); <-watched }()
	}
	if _, err := nodes[stopped].run("stop_app"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := nodes[stopped].run("start_app"); err != nil {
			t.Errorf("restarting node %d: %v", stopped+1, err)
		}
		if _, err := nodes[stopped].run("await_startup"); err != nil {
			t.Errorf("node %d back: %v", stopped+1, err)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for _, n := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(cctx, n)
		}
	}()

	// Once a surviving node leads the .dlq, ask as an operator told "try
	// again" would (the watch above asked throughout the election).
	if layout == acemq.ReplicatedLayout {
		begun := time.Now()
		for {
			leader, err := queueNode(alive, res.dlq)
			if err == nil && leader != "" && leader != holder {
				t.Logf("%s: %s leads it %s after stop_app returned", res.dlq, leader, time.Since(begun).Round(time.Millisecond))
				break
			}
			if time.Since(begun) > time.Minute {
				t.Fatalf("%s: no surviving node leads it a minute after the stop (%q, %v)", res.dlq, leader, err)
			}
			time.Sleep(200 * time.Millisecond) // polling the management API for the election
		}
		endWatch()
		w := <-watched
		watched <- w // for the deferred wait
		t.Logf("dlq list asked %d times from before stop_app until a survivor led %s: %d times count unknown (non-zero exit), never 0", w.asked, res.dlq, w.unknown)
		for _, e := range w.errs {
			t.Error(e)
		}
	}

	// acemq dlq list, from the surviving node.
	r := acemqCmd(t, "", "dlq", "list", "--url", alive.amqp, "--management-url", alive.mgmt, "--json")
	var depths []struct {
		Name     string `json:"name"`
		Messages int    `json:"messages"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &depths) != nil {
		res.listErr = fmt.Sprintf("dlq list: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
	for _, d := range depths {
		if d.Name == res.dlq {
			res.listed = d.Messages
		}
	}

	// The console, on a Conn to the surviving node.
	cc, err := acemq.Connect(ctx, alive.amqp, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(ctx)
	token := "drill-cluster-token-0123456789"
	con, err := console.New(cc, console.Config{URL: alive.amqp, ManagementURL: alive.mgmt, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/q/"+url.PathEscape(res.dlq), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		res.showErr = "console: " + err.Error()
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, id := range ids[:20] {
			if strings.Contains(string(body), id) {
				res.shown++
			}
		}
		if res.shown < 20 {
			res.showErr = fmt.Sprintf("console: %d %s", resp.StatusCode, firstLines(string(body), 3))
		}
	}

	// acemq dlq replay, from the surviving node: each back on q.
	back := map[string]int{}
	got := make(chan struct{}, 30)
	// On the surviving node's Conn: the first may be recovering from the
	// stop.
	k2, err := acemq.Consume(ctx, cc, q, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		mu.Lock()
		back[m.Payload]++
		mu.Unlock()
		got <- struct{}{}
		return acemq.Accept()
	}, acemq.ConsumerConfig{NoDeadLetterDeclaration: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close(ctx)
	// The management API through the environment: replay reads it there
	// where it reads one at all.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, acemqBinary, "dlq", "replay", res.dlq, "--url", alive.amqp)
	cmd.Env = append(os.Environ(), "ACEMQ_MANAGEMENT_URL="+alive.mgmt)
	if out, err := cmd.CombinedOutput(); err != nil {
		res.playErr = fmt.Sprintf("dlq replay: %v: %s", err, strings.TrimSpace(string(out)))
	}
	for i := 0; i < 20; i++ {
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			i = 20
		}
	}
	mu.Lock()
	for _, id := range ids[:20] {
		if back[id] > 0 {
			res.replayed++
		}
	}
	mu.Unlock()
	return res
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// listWatch is what dlq list said while a .dlq's leader was lost.
type listWatch struct {
	asked, unknown int
	errs           []string // each answer that was neither the count nor "count unknown"
}

// watchList runs acemq dlq list --json against node until stop closes and
// checks each answer about dlq: want messages, or no count (count unknown)
// with a non-zero exit and the sentence on stderr. It runs no t methods
// (it is not the test's goroutine).
func watchList(stop <-chan struct{}, node clusterNode, dlq string, want int) listWatch {
	var w listWatch
	begun := time.Now()
	for {
		select {
		case <-stop:
			return w
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, acemqBinary, "dlq", "list", "--url", node.amqp, "--management-url", node.mgmt, "--json")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		w.asked++
		at := time.Since(begun).Round(time.Millisecond)
		var rows []struct {
			Name     string `json:"name"`
			Messages *int   `json:"messages"`
			Unknown  string `json:"countUnknown"`
		}
		_ = json.Unmarshal([]byte(stdout.String()), &rows)
		for _, r := range rows {
			switch {
			case r.Name != dlq:
			case r.Messages == nil:
				w.unknown++
				if err == nil || !strings.Contains(stderr.String(), "count unknown") {
					w.errs = append(w.errs, fmt.Sprintf("dlq list %s in: count unknown (%s) but %v, stderr %q", at, r.Unknown, err, stderr.String()))
				}
			case *r.Messages != want:
				w.errs = append(w.errs, fmt.Sprintf("dlq list %s in printed %d for %s, which holds %d (%v, %s)", at, *r.Messages, dlq, want, err, strings.TrimSpace(stderr.String())))
			}
		}
	}
}
