//go:build drill

// The cluster drill needs three RabbitMQ nodes: `make drill-cluster` starts
// them and runs it (make test does too, before the main suite).

package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// The cluster drill (behaviour §1.3, §4.1, §9): three RabbitMQ nodes on
// loopback, a quorum queue, a Conn given every node's address, and the node
// it is connected to stopped while eight publishers and a consumer run. It
// needs a 3-node cluster and takes about a minute, so it runs only under
// `make drill-cluster`, which starts one in its own state directory and
// stops it afterwards.

type drillMsg struct {
	ID string `json:"id"`
}

// clusterNodes is the drill's view of the cluster: one host:port and one
// rabbitmqctl wrapper per node, in the order scripts/rabbitmq.sh wrote them.
type clusterNodes struct {
	url   string
	addrs []string
	ctls  []string
}

func clusterFromEnv(t *testing.T) clusterNodes {
	t.Helper()
	raw := os.Getenv("ACEMQ_TEST_AMQP_URLS")
	if raw == "" {
		// Worded without the service-variable prefix on purpose: `make test`
		// never starts a cluster, and its test filter must not count this
		// skip as a missing service.
		t.Skip("the cluster drill runs under `make drill-cluster`, which starts a 3-node cluster for it")
	}
	var n clusterNodes
	for i, u := range strings.Split(raw, ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			t.Fatalf("node URL %d: %v", i+1, err)
		}
		if i == 0 {
			n.url = pu.String()
		}
		n.addrs = append(n.addrs, pu.Host)
		name := "ACEMQ_TEST_RABBITMQCTL"
		if i > 0 {
			name = fmt.Sprintf("ACEMQ_TEST_RABBITMQCTL_%d", i+1)
		}
		ctl := os.Getenv(name)
		if ctl == "" {
			t.Fatalf("%s is not set; `make drill-cluster` sets it", name)
		}
		n.ctls = append(n.ctls, ctl)
	}
	if len(n.addrs) != 3 {
		t.Fatalf("the drill wants 3 nodes, the environment lists %d", len(n.addrs))
	}
	return n
}

// ctl runs rabbitmqctl against node i (0-based).
func (n clusterNodes) ctl(i int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.ctls[i], args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl (node %d) %s: %v\n%s", i+1, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// connectionAddrs lists, asking node via, the server address (host:port)
// of each AMQP connection whose client properties mention prefix; the
// port says which node it is attached to.
func (n clusterNodes) connectionAddrs(t *testing.T, via int, prefix string) []string {
	t.Helper()
	out, err := n.ctl(via, "list_connections", "name", "client_properties", "--formatter", "json", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Name  string `json:"name"` // "client:port -> server:port"
		Props []any  `json:"client_properties"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("list_connections: %v\n%s", err, out)
	}
	var addrs []string
	for _, r := range rows {
		if strings.Contains(fmt.Sprint(r.Props), prefix) {
			_, server, _ := strings.Cut(r.Name, " -> ")
			addrs = append(addrs, server)
		}
	}
	return addrs
}

// nodeName is node i's Erlang node name, as its own rabbitmqctl reports it.
func (n clusterNodes) nodeName(t *testing.T, i int) string {
	t.Helper()
	out, err := n.ctl(i, "eval", "node().")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(strings.TrimSpace(out), "'")
}

// runningNodes is how many nodes node via sees running.
func (n clusterNodes) runningNodes(via int) (int, error) {
	out, err := n.ctl(via, "cluster_status", "--formatter", "json", "--quiet")
	if err != nil {
		return 0, err
	}
	var st struct {
		Running []string `json:"running_nodes"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return 0, fmt.Errorf("cluster_status: %v\n%s", err, out)
	}
	return len(st.Running), nil
}

// quorumStatus returns queue q's leader and online members, asking node via.
func (n clusterNodes) quorumStatus(via int, q string) (leader string, online []string, err error) {
	out, err := n.ctl(via, "list_queues", "name", "leader", "online", "--formatter", "json", "--quiet")
	if err != nil {
		return "", nil, err
	}
	var rows []struct {
		Name   string `json:"name"`
		Leader string `json:"leader"`
		Online any    `json:"online"` // a list for quorum queues, "" for classic ones
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return "", nil, fmt.Errorf("list_queues: %v\n%s", err, out)
	}
	for _, r := range rows {
		if r.Name == q {
			list, _ := r.Online.([]any)
			for _, m := range list {
				online = append(online, fmt.Sprint(m))
			}
			return r.Leader, online, nil
		}
	}
	return "", nil, fmt.Errorf("queue %s is not listed by node %d", q, via+1)
}

// drillLedger is what the publishers and the consumer saw.
type drillLedger struct {
	mu         sync.Mutex
	confirmed  map[string]time.Time // id → when its Send returned nil
	consumed   map[string]int       // id → deliveries handled
	mayBeLost  []string             // ids whose attempt failed "may have been lost"
	unsentFail []error              // failures that say "not sent" but are not refusals
	other      []error              // anything else (unroutable, ...)
	refused    int
	attempts   int
	newID      chan struct{} // pulsed when the consumer sees an id for the first time
	confirmedN atomic.Int64
	waiters    map[int64]chan struct{} // closed when confirmedN reaches the key
}

// when returns a channel closed once n publishes have been confirmed.
func (l *drillLedger) when(n int64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if l.confirmedN.Load() >= n {
		close(ch)
		return ch
	}
	l.waiters[n] = ch
	return ch
}

// confirm records id as confirmed at; l.mu is held.
func (l *drillLedger) confirm(id string, at time.Time) {
	l.confirmed[id] = at
	n := l.confirmedN.Add(1)
	for k, ch := range l.waiters {
		if n >= k {
			close(ch)
			delete(l.waiters, k)
		}
	}
}

func (l *drillLedger) pulse() {
	select {
	case l.newID <- struct{}{}:
	default:
	}
}

func TestClusterSurvivesTheLossOfTheNodeItIsConnectedTo(t *testing.T) {
	nodes := clusterFromEnv(t)
	n1 := nodes.nodeName(t, 0)
	n2 := nodes.nodeName(t, 1)
	// Whatever happens below, leave the cluster whole for the next run.
	t.Cleanup(func() {
		if _, err := nodes.ctl(0, "start_app"); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client := testenv.Unique("acemq-drill")
	events := newEventLog()
	c, err := acemq.Connect(ctx, nodes.url, acemq.Config{Addresses: nodes.addrs, ClientName: client, OnEvent: events.add, Logger:
	// The library's warnings (loss, failed attempts and their causes)
	// are part of the drill's report.
	slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })

	q := testenv.Unique("drill.cluster")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A connection of its own: the drill's may be gone by now.
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		admin, err := acemq.Connect(dctx, nodes.url, acemq.Config{Addresses: nodes.addrs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer admin.Close(dctx)
		for _, name := range []string{q, q + ".dlq", q + ".parked"} {
			if _, err := admin.DeleteQueue(dctx, name); err != nil {
				t.Logf("cleanup: delete %s: %v", name, err)
			}
		}
	})
	leaderBefore, _, err := nodes.quorumStatus(1, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodes.connectionAddrs(t, 1, client); len(got) != 2 || got[0] != nodes.addrs[0] || got[1] != nodes.addrs[0] {
		t.Fatalf("before the loss the Conn's two connections are on %v, want both on the first address, %s (%s)", got, nodes.addrs[0], n1)
	}

	led := &drillLedger{
		confirmed: map[string]time.Time{},
		consumed:  map[string]int{},
		newID:     make(chan struct{}, 1),
		waiters:   map[int64]chan struct{}{},
	}
	consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[drillMsg]) acemq.Decision {
		led.mu.Lock()
		led.consumed[m.Payload.ID]++
		first := led.consumed[m.Payload.ID] == 1
		led.mu.Unlock()
		if first {
			led.pulse()
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 200, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(context.Background())

	// Publishers: each sends ids g{n}-{i} one after another. A refusal
	// (nothing sent) is retried with the same id after a short pause; a
	// "may have been lost" failure is counted and resent with the same id,
	// as an application with a resend policy would, so every id ends
	// confirmed and the consumer must see every one.
	pub := acemq.NewPublisher[drillMsg](c, "", q, acemq.PublisherConfig{})
	const publishers = 8
	stop := make(chan struct{})
	reached := led.when
	var wg sync.WaitGroup
	for g := 0; g < publishers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, err := pub.SendWith(ctx, drillMsg{ID: id}, acemq.SendOptions{Envelope: new(acemq.Envelope{ID: id})})
					now := time.Now()
					led.mu.Lock()
					led.attempts++
					var pe *acemq.PublishError
					switch {
					case err == nil:
						led.confirm(id, now)
						led.mu.Unlock()
					case acemq.IsPaused(err):
						led.refused++
						led.mu.Unlock()
						// Publishing is paused while the Conn recovers:
						// the caller's back-off, not a synchronisation.
						time.Sleep(5 * time.Millisecond)
						continue
					case errors.As(err, &pe) && pe.Sent:
						led.mayBeLost = append(led.mayBeLost, id)
						led.mu.Unlock()
						continue
					case errors.As(err, &pe) && !pe.Unroutable:
						led.unsentFail = append(led.unsentFail, err)
						led.mu.Unlock()
						continue
					default:
						led.other = append(led.other, err)
						led.mu.Unlock()
						if ctx.Err() != nil {
							return
						}
						continue
					}
					break
				}
			}
		}(g)
	}
	stopPublishers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopPublishers()

	select {
	case <-reached(2000):
	case <-ctx.Done():
		t.Fatal("the publishers did not confirm 2000 messages before the loss")
	}

	// Lose node 1, where both connections (and the quorum queue's leader,
	// declared from there) live.
	mark := events.mark()
	beforeLoss := led.confirmedN.Load()
	lossCmd := time.Now()
	if _, err := nodes.ctl(0, "stop_app"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	lost := events.wait(t, acemq.EventLost, mark, 30*time.Second)
	rec := events.wait(t, acemq.EventRecovered, mark, 90*time.Second)
	after := led.confirmedN.Load()
	select {
	case <-reached(after + 2000):
	case <-ctx.Done():
		t.Fatal("publishing did not resume after the recovery")
	}
	stopPublishers()

	if got := nodes.connectionAddrs(t, 1, client); len(got) != 2 || got[0] != nodes.addrs[1] || got[1] != nodes.addrs[1] {
		t.Errorf("after the loss the Conn's connections are on %v, want both on %s (%s), the address after the one lost (§1.3)", got, nodes.addrs[1], n2)
	}

	// First confirmation of a publish that returned after the loss was noticed.
	led.mu.Lock()
	var firstAfter time.Time
	for _, at := range led.confirmed {
		if at.After(rec.At) && (firstAfter.IsZero() || at.Before(firstAfter)) {
			firstAfter = at
		}
	}
	led.mu.Unlock()

	// Every confirmed id must reach the consumer.
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	var missing []string
	for {
		led.mu.Lock()
		missing = missing[:0]
		for id := range led.confirmed {
			if led.consumed[id] == 0 {
				missing = append(missing, id)
			}
		}
		led.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		select {
		case <-led.newID:
			continue
		case <-deadline.C:
		}
		break
	}

	led.mu.Lock()
	dups, lostResentDup := 0, 0
	for id, n := range led.consumed {
		if n > 1 {
			dups++
		}
		_ = id
	}
	for _, id := range led.mayBeLost {
		if led.consumed[id] > 1 {
			lostResentDup++
		}
	}
	leaderAfter, _, err := nodes.quorumStatus(1, q)
	if err != nil {
		t.Error(err)
	}
	t.Logf("quorum leader of %s: %s before the loss, %s after", q, leaderBefore, leaderAfter)
	t.Logf("loss: stop_app took %s; noticed %s after the command; recovered (attempt %d) %s after the loss was noticed (event gap %s)",
		stopped.Sub(lossCmd).Round(time.Millisecond), lost.At.Sub(lossCmd).Round(time.Millisecond),
		rec.Attempt, rec.At.Sub(lost.At).Round(time.Millisecond), rec.Gap.Round(time.Millisecond))
	if !firstAfter.IsZero() {
		t.Logf("loss noticed → first confirmed publish after recovery: %s", firstAfter.Sub(lost.At).Round(time.Millisecond))
	}
	t.Logf("publishes: %d attempts, %d confirmed (%d before the loss), %d refused (paused, unsent), %d failed may-have-been-lost (resent with the same id; %d of those ids consumed more than once, i.e. the first copy had arrived or was redelivered), %d failed unsent-not-refused, %d other",
		led.attempts, len(led.confirmed), beforeLoss, led.refused, len(led.mayBeLost), lostResentDup, len(led.unsentFail), len(led.other))
	t.Logf("consumed: %d distinct ids, %d ids delivered more than once; %d confirmed ids missing", len(led.consumed), dups, len(missing))
	if len(rec.Skipped) > 0 {
		t.Logf("re-declarations skipped during recovery: %v", rec.Skipped)
	}
	unsent, other := led.unsentFail, led.other
	led.mu.Unlock()

	if len(missing) > 0 {
		if len(missing) > 10 {
			missing = missing[:10]
		}
		t.Errorf("confirmed ids never consumed (first %d): %v", len(missing), missing)
	}
	if len(unsent) > 0 {
		t.Errorf("%d publishes failed unsent without being refusals, e.g. %v", len(unsent), unsent[0])
	}
	if len(other) > 0 {
		t.Errorf("%d publishes failed otherwise, e.g. %v", len(other), other[0])
	}

	// Bring node 1 back and check the cluster is whole again.
	if _, err := nodes.ctl(0, "start_app"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.ctl(0, "await_startup"); err != nil {
		t.Fatal(err)
	}
	for via := 0; via < 3; via++ {
		n, err := nodes.runningNodes(via)
		if err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("node %d sees %d running nodes after start_app, want 3", via+1, n)
		}
	}
	// The quorum queue's member on node 1 rejoins once it has caught up;
	// poll the broker's view, bounded.
	rejoin := time.Now()
	for {
		_, online, err := nodes.quorumStatus(1, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(online) == 3 {
			t.Logf("after start_app: 3 nodes running; all 3 members of %s online %s after start_app returned", q, time.Since(rejoin).Round(time.Millisecond))
			break
		}
		if time.Since(rejoin) > 60*time.Second {
			t.Fatalf("the quorum queue %s has members %v online 60s after node 1 came back, want 3", q, online)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
