package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
)

// The partition drill (behaviour §1.3, §4.1, §9): a 3-node cluster whose
// nodes sit in network namespaces of their own (scripts/netcluster.sh),
// clients in the root namespace reaching every node, and the network cut
// between them at random moments while publishers and consumers run. Like
// Jepsen's set workload, publishers record every id the broker confirmed,
// consumers every id they accepted, and at the end, with the network whole
// again, every confirmed id on a quorum queue must have been consumed.

// Cluster is the partition drill's cluster: one AMQP URL and one
// rabbitmqctl command per node, and the command that cuts and heals the
// network between them.
type Cluster struct {
	// URLs holds each node's AMQP URL, node 1 first.
	URLs []string
	// Ctls holds, per node, the command (with leading arguments) that
	// runs rabbitmqctl against it.
	Ctls [][]string
	// Net is the fault command: Net + ["fault", kind, args...] makes a
	// fault, Net + ["heal"] removes them all (scripts/netcluster.sh).
	Net []string
	// Management holds, per node, its management HTTP API's base URL
	// (with credentials); when set the drill asks the cluster about
	// itself there instead of through rabbitmqctl (partition_api.go).
	Management []string
	// Version names the broker version, for the verdict line.
	Version string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer

	names []string // each node's Erlang name, when Management is set
}

func (c Cluster) logf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "partition: "+format+"\n", args...)
	}
}

// PartitionOptions shapes a run. The zero value is the short run `make
// test` makes: every fault once.
type PartitionOptions struct {
	// Seed makes the run's choices (order, targets, moments) repeatable;
	// 0 picks one, which the verdict line prints.
	Seed uint64
	// Rounds is how many times every fault is made (default 1).
	Rounds int
	// Hold is the longest a fault holds; each holds a random time
	// between half of it and it (default 8 s).
	Hold time.Duration
	// LeaderHold, when set, is the longest the quorum leader's isolation
	// holds instead of Hold (also from half of it): make test's short run
	// holds the other cuts under net_ticktime and this one past it, so
	// that one fault is a partition the cluster notices.
	LeaderHold time.Duration
	// Flap is how long the flapping fault goes on (default 15 s).
	Flap time.Duration
	// Pause, when set, is each publisher's pause before each send (a
	// SendAll batch of 20 waits 20 times as long): a drill that shares the
	// machine (make test's short run) publishes at a bounded rate instead
	// of as fast as the brokers confirm.
	Pause time.Duration
	// Publishers is the number of publishing goroutines per client
	// (default 3; the last of each client sends in batches with SendAll).
	Publishers int
	// Faults lists the faults to make, by name (default all of
	// PartitionFaults).
	Faults []string
	// Wait is the retry wait the path workloads hold on a rung (default
	// 5 s; partition_path.go), and PathPause each path publisher's pause
	// before each send (default 20 ms).
	Wait, PathPause time.Duration
}

// PartitionFaults are the faults the drill knows, in the order of the
// issue that asked for them.
var PartitionFaults = []string{"isolate-connected", "isolate-leader", "alone", "bridge", "flap", "lossy"}

func (o *PartitionOptions) defaults() {
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.Hold <= 0 {
		o.Hold = 8 * time.Second
	}
	if o.Flap <= 0 {
		o.Flap = 15 * time.Second
	}
	if o.Publishers <= 0 {
		o.Publishers = 3
	}
	if len(o.Faults) == 0 {
		o.Faults = PartitionFaults
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	if o.PathPause <= 0 {
		o.PathPause = 20 * time.Millisecond
	}
}

// partLedger is what one queue's publishers and consumers saw.
type partLedger struct {
	mu        sync.Mutex
	confirmed map[string]bool
	consumed  map[string]int
	resent    map[string]bool // ids sent again after "may have arrived"
	refused   int
	failed    int // other failures, each resent
	lastPub   atomic.Int64
	lastCon   atomic.Int64
	newID     chan struct{}
}

func newPartLedger() *partLedger {
	return &partLedger{confirmed: map[string]bool{}, consumed: map[string]int{}, resent: map[string]bool{}, newID: make(chan struct{}, 1)}
}

func (l *partLedger) confirm(id string) {
	l.mu.Lock()
	l.confirmed[id] = true
	l.mu.Unlock()
	l.lastPub.Store(time.Now().UnixNano())
}

func (l *partLedger) consume(id string) {
	l.mu.Lock()
	l.consumed[id]++
	first := l.consumed[id] == 1
	l.mu.Unlock()
	l.lastCon.Store(time.Now().UnixNano())
	if first {
		select {
		case l.newID <- struct{}{}:
		default:
		}
	}
}

// missing lists the confirmed ids not consumed yet.
func (l *partLedger) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.confirmed {
		if l.consumed[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// dups counts ids consumed more than once: those resent after "may have
// arrived" (publish side) and the others (delivery side: a redelivery).
func (l *partLedger) dups() (publishSide, deliverySide int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, n := range l.consumed {
		if n > 1 {
			if l.resent[id] {
				publishSide++
			} else {
				deliverySide++
			}
		}
	}
	return
}

type partID struct {
	ID string `json:"id"`
}

// partClient is one Conn with its publishers and consumers.
type partClient struct {
	name   string
	conn   *acemq.Conn
	health sync.Map // status string → true, reset per fault
}

// Partition runs the partition drill on cluster and returns its verdict.
// It fails when a confirmed id on the quorum queue was never consumed;
// the classic queue's numbers are information (RabbitMQ's own semantics
// decide them). It heals the network before it returns, also on failure.
func Partition(ctx context.Context, cl Cluster, o PartitionOptions) *Result {
	o.defaults()
	r := newResult("partition")
	start := time.Now()
	defer func() { r.Took = time.Since(start) }()
	r.Set("version", cl.Version)
	r.Set("seed", o.Seed)
	if len(cl.URLs) != 3 || len(cl.Ctls) != 3 || len(cl.Net) == 0 {
		r.Failf("the drill wants 3 node URLs, 3 rabbitmqctl commands and a fault command (scripts/netcluster.sh up prints them)")
		return r
	}
	if len(cl.Management) != 0 {
		if len(cl.Management) != 3 {
			r.Failf("the drill wants 3 management URLs (one per node) or none, got %d", len(cl.Management))
			return r
		}
		names, err := cl.nodeNames(ctx)
		if err != nil {
			r.Failf("the nodes' names: %v", err)
			return r
		}
		cl.names = names
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	defer func() {
		if err := cl.heal(context.WithoutCancel(ctx)); err != nil {
			r.Failf("healing the network at the end: %v", err)
		}
	}()

	addrs := make([]string, len(cl.URLs))
	for i, u := range cl.URLs {
		pu, err := url.Parse(u)
		if err != nil {
			r.Failf("node URL %d: %v", i+1, err)
			return r
		}
		addrs[i] = pu.Host
	}
	// Two clients, on "each side": one tries node 1 first, the other
	// node 3.
	clients := make([]*partClient, 2)
	for i := range clients {
		order := slices.Clone(addrs)
		if i == 1 {
			slices.Reverse(order)
		}
		name := unique("acemq-partition-" + string(rune('a'+i)))
		first := cl.URLs[0]
		if i == 1 {
			first = cl.URLs[2]
		}
		if cl.names != nil {
			// A user of its own, by which the connection tracking names
			// the client (apiConnectedNode).
			pass := "pw-" + name
			if err := cl.addUser(ctx, name, pass); err != nil {
				r.Failf("a user for client %s: %v", name, err)
				return r
			}
			defer func() { _ = cl.deleteUser(context.WithoutCancel(ctx), name) }()
			u, err := url.Parse(first)
			if err != nil {
				r.Failf("node URL %s: %v", first, err)
				return r
			}
			u.User = url.UserPassword(name, pass)
			first = u.String()
		}
		c, err := acemq.Connect(ctx, first, acemq.Config{Addresses: order, ClientName: name, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			r.Failf("connect: %v", err)
			return r
		}
		defer c.Close(context.WithoutCancel(ctx))
		clients[i] = &partClient{name: name, conn: c}
	}

	qq, qc, qs := unique("drill.partition.quorum"), unique("drill.partition.classic"), unique("drill.partition.stream")
	topo := acemq.NewTopology().Queue(qq, acemq.QueueOptions{}).Queue(qc, acemq.QueueOptions{Type: acemq.Classic}).Queue(qs, acemq.QueueOptions{Type: acemq.Stream})
	if err := clients[0].conn.Apply(ctx, topo); err != nil {
		r.Failf("declare the queues: %v", err)
		return r
	}
	if err := clients[1].conn.Apply(ctx, topo); err != nil {
		r.Failf("declare the queues (second client): %v", err)
		return r
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, q := range []string{qq, qc, qs, qq + ".dlq", qc + ".dlq", qs + ".dlq", qq + ".parked", qc + ".parked", qs + ".parked"} {
			_, _ = clients[0].conn.DeleteQueue(dctx, q)
		}
	}()

	// The path through the library's own queues, once per layout.
	paths, err := startPaths(ctx, cl.URLs[0], addrs, o)
	if err != nil {
		r.Failf("%v", err)
		return r
	}
	defer paths.close(ctx)

	quorum, classic, streamLed := newPartLedger(), newPartLedger(), newPartLedger()
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopRun(); wg.Wait() }()

	// Consumers: each client consumes both queues.
	var consumers []interface{ Close(context.Context) error }
	for _, c := range clients {
		for _, q := range []struct {
			name string
			led  *partLedger
		}{{qq, quorum}, {qc, classic}} {
			led := q.led
			cons, err := acemq.Consume(ctx, c.conn, q.name, func(_ context.Context, m *acemq.Message[partID]) acemq.Decision {
				led.consume(m.Payload.ID)
				return acemq.Accept()
			}, acemq.ConsumerConfig{Prefetch: 100, Concurrency: 2})
			if err != nil {
				r.Failf("consume %s: %v", q.name, err)
				return r
			}
			consumers = append(consumers, cons)
		}
	}
	defer func() {
		for _, c := range consumers {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}()

	// A stream reader on the second client, from the stream's first
	// offset, checkpointing every 50 messages or second.
	st := &streamTrack{last: -1, led: streamLed, store: &stream.MemoryCheckpoints{}, stream: qs, reader: "drill-partition-reader"}
	reader, err := stream.Read(ctx, clients[1].conn, qs, st.reader, st.handle, stream.From(stream.First()), stream.Checkpoint(st.store, 50, time.Second))
	if err != nil {
		r.Failf("read stream %s: %v", qs, err)
		return r
	}
	defer func() { _ = reader.Close(context.WithoutCancel(ctx)) }()

	// Publishers.
	for ci, c := range clients {
		pq := acemq.NewPublisher[partID](c.conn, "", qq, acemq.PublisherConfig{})
		pc := acemq.NewPublisher[partID](c.conn, "", qc, acemq.PublisherConfig{})
		for g := 0; g < o.Publishers; g++ {
			prefix := fmt.Sprintf("c%d-g%d-", ci, g)
			wg.Add(1)
			if g == o.Publishers-1 {
				go func() { defer wg.Done(); publishBatches(runCtx, pq, prefix, quorum, o.Pause) }()
			} else {
				go func() { defer wg.Done(); publishOne(runCtx, pq, prefix, quorum, o.Pause) }()
			}
		}
		wg.Add(1)
		go func() { defer wg.Done(); publishOne(runCtx, pc, fmt.Sprintf("c%d-classic-", ci), classic, o.Pause) }()
		if ci == 0 {
			ps := acemq.NewPublisher[partID](c.conn, "", qs, acemq.PublisherConfig{})
			wg.Add(1)
			go func() { defer wg.Done(); publishOne(runCtx, ps, "c0-stream-", streamLed, o.Pause) }()
		}
	}

	paths.publish(runCtx, &wg, o.PathPause)

	// Health, sampled on both clients while the drill runs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			for _, c := range clients {
				h := c.conn.Health(runCtx)
				c.health.Store(string(h.Status), true)
			}
		}
	}()

	if err := waitFlowing(ctx, quorum, 200, 60*time.Second); err != nil {
		r.Failf("before any fault: %v", err)
		return r
	}

	// The faults, in a seeded order, each Rounds times.
	var plan []string
	for range o.Rounds {
		round := slices.Clone(o.Faults)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		plan = append(plan, round...)
	}
	var recoveries []time.Duration
	healthSeen := map[string]map[string]bool{}
	for n, kind := range plan {
		if ctx.Err() != nil {
			r.Failf("the drill ran out of time after %d of %d faults", n, len(plan))
			break
		}
		// A random moment.
		if err := sleepCtx(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond); err != nil {
			break
		}
		for _, c := range clients {
			c.health.Clear()
		}
		desc, err := cl.fault(ctx, rng, kind, o, clients[0].name, qq)
		if err != nil {
			r.Failf("fault %s: %v", kind, err)
			break
		}
		cl.logf("%d/%d %s", n+1, len(plan), desc)
		if err := cl.heal(ctx); err != nil {
			r.Failf("heal after %s: %v", kind, err)
			break
		}
		healed := time.Now()
		for ci, c := range clients {
			key := fmt.Sprintf("%s/client%d", kind, ci+1)
			healthSeen[key] = map[string]bool{}
			c.health.Range(func(k, _ any) bool { healthSeen[key][k.(string)] = true; return true })
		}
		// Liveness: publishing and consuming on the quorum queue after
		// the heal.
		took, err := resumed(ctx, quorum, healed, 90*time.Second)
		if err != nil {
			r.Failf("after %s healed: %v", desc, err)
		}
		recoveries = append(recoveries, took)
		cl.logf("   healed; publishing and consuming resumed %s after", took.Round(time.Millisecond))
		if err := cl.settle(ctx, qq, 120*time.Second); err != nil {
			r.Failf("after %s: %v", desc, err)
			break
		}
	}

	// The end: stop publishing, let the consumers take every confirmed id.
	stopRun()
	wg.Wait()
	// Quorum queue and stream: until no new id for 90 s (a confirmed id
	// missing then is a failure). The classic queue is information, and
	// on 3.10 under pause_minority it loses what was published while its
	// node was paused: 10 s.
	waitDrained(ctx, quorum, 90*time.Second)
	waitDrained(ctx, streamLed, 90*time.Second)
	waitDrained(ctx, classic, 10*time.Second)
	sMissing := streamLed.missing()
	skipped, reread, early := st.counts()
	// A confirmed id the reader never handed over is either one the
	// reader missed (a library defect: a failure) or one the stream no
	// longer holds (the broker confirmed a write it then lost in the
	// failover: RabbitMQ's own, rabbitmq-server#9457, reported). A fresh
	// reader from the first offset on the other client tells them apart.
	var notInLog []string
	if len(sMissing) > 0 {
		held, err := auditStream(ctx, clients[0].conn, qs, sMissing, 15*time.Second)
		if err != nil {
			r.Failf("re-read the stream to look for the %d ids its reader never handed over: %v", len(sMissing), err)
		}
		var inLog []string
		for _, id := range sMissing {
			if held[id] {
				inLog = append(inLog, id)
			} else {
				notInLog = append(notInLog, id)
			}
		}
		sMissing = inLog
	}

	qMissing, cMissing := quorum.missing(), classic.missing()
	qPub, qDel := quorum.dups()
	cPub, cDel := classic.dups()
	r.Set("faults", len(plan))
	r.Set("confirmed", len(quorum.confirmed))
	r.Set("lost", len(qMissing))
	r.Set("dup_publish", qPub)
	r.Set("dup_delivery", qDel)
	r.Set("resent", len(quorum.resent))
	r.Set("refused", quorum.refused)
	slices.Sort(recoveries)
	if len(recoveries) > 0 {
		r.Set("resume_p50", ms(recoveries[len(recoveries)/2]))
		r.Set("resume_max", ms(recoveries[len(recoveries)-1]))
	}
	r.Set("classic_confirmed", len(classic.confirmed))
	r.Set("classic_lost", len(cMissing))
	r.Set("classic_dup", cPub+cDel)
	r.Set("stream_confirmed", len(streamLed.confirmed))
	r.Set("stream_lost", len(sMissing))
	r.Set("stream_not_in_log", len(notInLog))
	r.Set("stream_skipped", skipped)
	r.Set("stream_reread", reread)
	paths.finish(ctx, cl, r)
	keys := make([]string, 0, len(healthSeen))
	for k := range healthSeen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var st []string
		for s := range healthSeen[k] {
			st = append(st, s)
		}
		sort.Strings(st)
		cl.logf("health during %s: %s", k, strings.Join(st, ","))
	}
	if len(qMissing) > 0 {
		show := qMissing
		if len(show) > 10 {
			show = show[:10]
		}
		r.Failf("%d confirmed ids on the quorum queue were never consumed (first %v)", len(qMissing), show)
	}
	if len(sMissing) > 0 {
		r.Failf("%d confirmed ids on the stream are in its log but its reader never handed them over (first %v)", len(sMissing), sMissing[:min(10, len(sMissing))])
	}
	if len(notInLog) > 0 {
		cl.logf("stream (the broker's, not a reader failure): %d ids the broker confirmed are not in the stream's log when it is read again from the first offset (first %v)", len(notInLog), notInLog[:min(10, len(notInLog))])
	}
	if skipped > 0 {
		r.Failf("the stream reader skipped %d offsets", skipped)
	}
	if early > 0 {
		r.Failf("the stream reader read %d offsets again that its last checkpoint had already covered", early)
	}
	if len(cMissing) > 0 {
		show := cMissing
		if len(show) > 10 {
			show = show[:10]
		}
		cl.logf("classic queue (information, not a failure): %d confirmed ids never consumed (first %v)", len(cMissing), show)
	}
	return r
}

// auditStream reads stream from its first offset with a reader of its own
// and reports which of ids it holds. It stops when it has found them all
// or when idle passes without a message (the whole log has been read).
func auditStream(ctx context.Context, c *acemq.Conn, qs string, ids []string, idle time.Duration) (map[string]bool, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var mu sync.Mutex
	held := map[string]bool{}
	seen := make(chan struct{}, 1)
	h := func(_ context.Context, m *stream.Message[partID]) acemq.Decision {
		mu.Lock()
		if want[m.Payload.ID] {
			held[m.Payload.ID] = true
		}
		mu.Unlock()
		select {
		case seen <- struct{}{}:
		default:
		}
		return acemq.Accept()
	}
	rd, err := stream.Read(ctx, c, qs, "drill-partition-audit", h, stream.From(stream.First()), stream.Prefetch(500))
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close(context.WithoutCancel(ctx)) }()
	for {
		mu.Lock()
		all := len(held) == len(want)
		mu.Unlock()
		if all {
			break
		}
		t := time.NewTimer(idle)
		select {
		case <-seen:
			t.Stop()
			continue
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		break
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(held), nil
}

// streamTrack checks a stream reader's offsets: each one is the one after
// the newest handled (else offsets were skipped) or a re-read, and a
// re-read never goes back to an offset the last saved checkpoint covers.
type streamTrack struct {
	led            *partLedger
	store          *stream.MemoryCheckpoints
	stream, reader string

	mu      sync.Mutex
	last    int64 // newest offset handled, -1 none
	skipped int64
	reread  int
	early   int // re-reads at or before the checkpoint saved then
}

func (st *streamTrack) handle(ctx context.Context, m *stream.Message[partID]) acemq.Decision {
	st.mu.Lock()
	switch {
	case m.Offset <= st.last:
		st.reread++
		if saved, ok, _ := st.store.Load(ctx, st.stream, st.reader); ok && m.Offset <= saved {
			st.early++
		}
	case m.Offset > st.last+1:
		st.skipped += m.Offset - st.last - 1
	}
	st.last = max(st.last, m.Offset)
	st.mu.Unlock()
	st.led.consume(m.Payload.ID)
	return acemq.Accept()
}

func (st *streamTrack) counts() (skipped int64, reread, early int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.skipped, st.reread, st.early
}

// publishOne sends ids prefix0, prefix1, ... one at a time until ctx ends.
// A refusal (paused) is retried after a pause; a failure that may have
// arrived is resent with the same id and recorded; any other failure is
// resent too.
func publishOne(ctx context.Context, p *acemq.Publisher[partID], prefix string, led *partLedger, pause time.Duration) {
	for i := 0; ctx.Err() == nil; i++ {
		if pause > 0 && sleepCtx(ctx, pause) != nil {
			return
		}
		id := fmt.Sprintf("%s%d", prefix, i)
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := p.SendWith(sctx, partID{ID: id}, acemq.SendOptions{Envelope: &acemq.Envelope{ID: id}})
			cancel()
			if err == nil {
				led.confirm(id)
				break
			}
			if !recordFailure(ctx, led, id, err) {
				return
			}
		}
	}
}

// publishBatches sends ids in batches of 20 with SendAll; failed members
// go again in the next batch.
func publishBatches(ctx context.Context, p *acemq.Publisher[partID], prefix string, led *partLedger, pause time.Duration) {
	next := 0
	var again []string
	for ctx.Err() == nil {
		if pause > 0 && sleepCtx(ctx, 20*pause) != nil {
			return
		}
		ids := again
		again = nil
		for len(ids) < 20 {
			ids = append(ids, fmt.Sprintf("%s%d", prefix, next))
			next++
		}
		payloads := make([]partID, len(ids))
		envs := make([]acemq.Envelope, len(ids))
		for i, id := range ids {
			payloads[i], envs[i] = partID{ID: id}, acemq.Envelope{ID: id}
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := p.SendAllWith(sctx, payloads, acemq.SendOptions{Envelopes: envs})
		cancel()
		if err == nil {
			for _, id := range ids {
				led.confirm(id)
			}
			continue
		}
		var be *acemq.BatchPublishError
		if !errors.As(err, &be) || len(be.Results) != len(ids) {
			// Nothing per member: every id goes again.
			for _, id := range ids {
				if !recordFailure(ctx, led, id, err) {
					return
				}
			}
			again = ids
			continue
		}
		for i, res := range be.Results {
			if res.Err == nil {
				led.confirm(ids[i])
				continue
			}
			if !recordFailure(ctx, led, ids[i], res.Err) {
				return
			}
			again = append(again, ids[i])
		}
	}
}

// recordFailure counts a failed send of id and pauses before the resend;
// false when ctx has ended.
func recordFailure(ctx context.Context, led *partLedger, id string, err error) bool {
	var pe *acemq.PublishError
	led.mu.Lock()
	switch {
	case acemq.IsPaused(err):
		led.refused++
	case errors.As(err, &pe) && pe.Sent:
		led.resent[id] = true
	default:
		if ctx.Err() == nil {
			led.failed++
			// Unknown failures may have arrived too.
			led.resent[id] = true
		}
	}
	led.mu.Unlock()
	// The caller's back-off before a resend, not a synchronisation.
	return sleepCtx(ctx, 20*time.Millisecond) == nil
}

// waitFlowing waits until n ids have been confirmed and consumed.
func waitFlowing(ctx context.Context, led *partLedger, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		led.mu.Lock()
		c, d := len(led.confirmed), len(led.consumed)
		led.mu.Unlock()
		if c >= n && d >= n {
			return nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("fewer than %d ids confirmed and consumed within %s", n, limit)
}

// resumed waits until both a publish was confirmed and a delivery
// consumed after since, and returns how long after since the later came.
func resumed(ctx context.Context, led *partLedger, since time.Time, limit time.Duration) (time.Duration, error) {
	deadline := since.Add(limit)
	for {
		p, c := led.lastPub.Load(), led.lastCon.Load()
		if p > since.UnixNano() && c > since.UnixNano() {
			return time.Duration(max(p, c) - since.UnixNano()), nil
		}
		if time.Now().After(deadline) {
			return limit, fmt.Errorf("publishing or consuming had not resumed %s after the heal", limit)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// waitDrained waits until every confirmed id was consumed, or until no new
// id arrived for limit.
func waitDrained(ctx context.Context, led *partLedger, limit time.Duration) {
	for len(led.missing()) > 0 {
		t := time.NewTimer(limit)
		select {
		case <-led.newID:
			t.Stop()
		case <-t.C:
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// run runs cmd with args, bounded.
func runBounded(ctx context.Context, limit time.Duration, argv []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	all := append(slices.Clone(argv[1:]), args...)
	cmd := exec.CommandContext(ctx, argv[0], all...)
	ownGroup(cmd)
	// Past the limit, stop waiting for output a stray child still holds.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", strings.Join(argv, " "), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c Cluster) heal(ctx context.Context) error {
	_, err := runBounded(ctx, time.Minute, c.Net, "heal")
	return err
}

// nodeOf maps "10.213.7.2:5672" to node index 1 by the URLs' hosts.
func (c Cluster) nodeOf(hostport string) int {
	for i, u := range c.URLs {
		pu, err := url.Parse(u)
		if err == nil && pu.Host == hostport {
			return i
		}
	}
	return -1
}

// ctl runs rabbitmqctl against node i.
func (c Cluster) ctl(ctx context.Context, i int, args ...string) (string, error) {
	return runBounded(ctx, 45*time.Second, c.Ctls[i], args...)
}

// connectedNode is the node client's connections are attached to, asking
// each node in turn until one answers.
func (c Cluster) connectedNode(ctx context.Context, client string) (int, error) {
	if c.names != nil {
		// RabbitMQ 4 with the deprecated management_metrics_collection
		// denied lists no connections: then rabbitmqctl.
		n, err := c.apiConnectedNode(ctx, client)
		if err == nil || len(c.Ctls) == 0 {
			return n, err
		}
	}
	var last error
	for via := range c.Ctls {
		out, err := runBounded(ctx, 90*time.Second, c.Ctls[via], "list_connections", "name", "client_properties", "--formatter", "json", "--quiet")
		if err != nil {
			last = err
			continue
		}
		var rows []struct {
			Name  string `json:"name"`
			Props []any  `json:"client_properties"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			last = err
			continue
		}
		for _, row := range rows {
			if strings.Contains(fmt.Sprint(row.Props), client) {
				_, server, _ := strings.Cut(row.Name, " -> ")
				if n := c.nodeOf(server); n >= 0 {
					return n, nil
				}
			}
		}
		last = fmt.Errorf("no connection of %s listed by node %d", client, via+1)
	}
	return -1, last
}

// quorumRow finds quorum queue q's leader (as a node index) and online
// members, asking each node for the queues it leads (--local: a
// cluster-wide listing waits on every node, and times out while one is
// slow or cut off).
func (c Cluster) quorumRow(ctx context.Context, q string) (leader int, online int, err error) {
	if c.names != nil {
		return c.apiQueue(ctx, q)
	}
	err = fmt.Errorf("no node lists queue %s as its own", q)
	for via := range c.Ctls {
		out, e := c.ctl(ctx, via, "list_queues", "name", "online", "--local", "--formatter", "json", "--quiet")
		if e != nil {
			err = e
			continue
		}
		var rows []struct {
			Name   string `json:"name"`
			Online any    `json:"online"`
		}
		if e := json.Unmarshal([]byte(out), &rows); e != nil {
			err = e
			continue
		}
		for _, row := range rows {
			if row.Name == q {
				list, _ := row.Online.([]any)
				return via, len(list), nil
			}
		}
	}
	return -1, 0, err
}

// fault makes one fault of kind and holds it; it returns a description.
// The network is left cut: the caller heals it.
func (c Cluster) fault(ctx context.Context, rng *rand.Rand, kind string, o PartitionOptions, client, q string) (string, error) {
	longest := o.Hold
	if kind == "isolate-leader" && o.LeaderHold > 0 {
		longest = o.LeaderHold
	}
	hold := longest/2 + time.Duration(rng.Int64N(int64(longest/2)+1))
	node := rng.IntN(3)
	net := func(args ...string) error {
		_, err := runBounded(ctx, time.Minute, c.Net, append([]string{"fault"}, args...)...)
		return err
	}
	var desc string
	switch kind {
	case "isolate-connected":
		whose := "the client's"
		n, err := c.connectedNode(ctx, client)
		if err != nil {
			c.logf("   cannot tell the client's node (%s); isolating node %d", firstLine(err), node+1)
			n, whose = node, "drawn: the client's node could not be told"
		}
		node, desc = n, fmt.Sprintf("isolate node %d (%s) from the other nodes for %s", n+1, whose, hold.Round(time.Millisecond))
		if err := net("isolate", fmt.Sprint(node+1)); err != nil {
			return "", err
		}
	case "isolate-leader":
		whose := "the quorum leader"
		n, _, err := c.quorumRow(ctx, q)
		if err != nil {
			c.logf("   cannot tell the quorum leader (%s); isolating node %d", firstLine(err), node+1)
			n, whose = node, "drawn: the leader could not be told"
		}
		node, desc = n, fmt.Sprintf("isolate node %d (%s) from the other nodes for %s", n+1, whose, hold.Round(time.Millisecond))
		if err := net("isolate", fmt.Sprint(node+1)); err != nil {
			return "", err
		}
	case "alone":
		desc = fmt.Sprintf("cut node %d from everything, clients included, for %s", node+1, hold.Round(time.Millisecond))
		if err := net("alone", fmt.Sprint(node+1)); err != nil {
			return "", err
		}
	case "bridge":
		desc = fmt.Sprintf("node %d bridges the other two, which do not see each other, for %s", node+1, hold.Round(time.Millisecond))
		if err := net("bridge", fmt.Sprint(node+1)); err != nil {
			return "", err
		}
	case "lossy":
		pct := 10 + rng.IntN(21)
		desc = fmt.Sprintf("node %d drops %d%% of its packets for %s", node+1, pct, hold.Round(time.Millisecond))
		if err := net("lossy", fmt.Sprint(node+1), fmt.Sprint(pct)); err != nil {
			return "", err
		}
	case "flap":
		end := time.Now().Add(o.Flap)
		cuts := 0
		for time.Now().Before(end) {
			n := rng.IntN(3)
			if err := net("isolate", fmt.Sprint(n+1)); err != nil {
				return "", err
			}
			cuts++
			if err := sleepCtx(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond); err != nil {
				return "", err
			}
			if err := c.heal(ctx); err != nil {
				return "", err
			}
			if err := sleepCtx(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("flapping: %d partitions made and healed over %s", cuts, o.Flap), nil
	default:
		return "", fmt.Errorf("unknown fault %q (known: %s)", kind, strings.Join(PartitionFaults, ", "))
	}
	return desc, sleepCtx(ctx, hold)
}

// settle waits until every node sees all three running, none reports a
// partition, and quorum queue q has all three members online. A node
// that stays partitioned 15 s after the heal (RabbitMQ's "ignore" handling
// leaves that to an operator), or that stays silent while the others see
// it down (a paused node hung in its restart), has its app restarted, as
// RabbitMQ's documentation says to, and the restart is logged.
func (c Cluster) settle(ctx context.Context, q string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	restarted := false
	for {
		ok, partitioned, why := c.whole(ctx, q)
		if ok {
			return nil
		}
		if partitioned >= 0 && !restarted && time.Until(deadline) < limit-15*time.Second {
			reason, _, _ := strings.Cut(why, "\n")
			c.logf("   node %d is still partitioned, or not back, 15 s after the heal (%s); restarting its app (the operator's step)", partitioned+1, reason)
			if _, err := c.ctl(ctx, partitioned, "stop_app"); err != nil {
				// A node hung in its own restart may refuse stop_app;
				// start_app is still the step to try.
				c.logf("   stop_app on node %d failed: %s", partitioned+1, firstLine(err))
			}
			if err := c.startApp(ctx, partitioned); err != nil {
				return err
			}
			restarted = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster was not whole %s after the heal: %s", limit, why)
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// startApp runs start_app on node i, up to ten times: RabbitMQ 4.0.5
// with transient_nonexcl_queues denied can fail a start_app (exit status
// 69, failed_to_deny_deprecated_features in the node's log): on a loaded
// machine once, and after a partition again and again (seen five times
// in a row over 25 s).
func (c Cluster) startApp(ctx context.Context, i int) error {
	var err error
	const tries = 10
	for try := 1; try <= tries; try++ {
		if _, err = c.ctl(ctx, i, "start_app"); err == nil {
			return nil
		}
		c.logf("   start_app on node %d failed (try %d of %d): %s", i+1, try, tries, firstLine(err))
		if e := sleepCtx(ctx, 3*time.Second); e != nil {
			return e
		}
	}
	return err
}

// whole reports whether the cluster is whole; when a node reports a
// partition, partitioned is its index, else -1.
func (c Cluster) whole(ctx context.Context, q string) (ok bool, partitioned int, why string) {
	if c.names != nil {
		if ok, partitioned, why = c.apiWhole(ctx); !ok {
			return ok, partitioned, why
		}
		return c.quorumWhole(ctx, q)
	}
	partitioned = -1
	for i := range c.Ctls {
		out, err := c.ctl(ctx, i, "cluster_status", "--formatter", "json", "--quiet")
		if err != nil {
			return false, -1, fmt.Sprintf("node %d: %v", i+1, err)
		}
		var st struct {
			Running    []string       `json:"running_nodes"`
			Partitions map[string]any `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return false, -1, fmt.Sprintf("node %d cluster_status: %v", i+1, err)
		}
		if len(st.Partitions) > 0 {
			return false, i, fmt.Sprintf("node %d reports partitions %v", i+1, st.Partitions)
		}
		if len(st.Running) != 3 {
			return false, -1, fmt.Sprintf("node %d sees %d running nodes", i+1, len(st.Running))
		}
	}
	return c.quorumWhole(ctx, q)
}

// quorumWhole reports whether quorum queue q has all three members online.
func (c Cluster) quorumWhole(ctx context.Context, q string) (ok bool, partitioned int, why string) {
	_, online, err := c.quorumRow(ctx, q)
	if err != nil {
		return false, -1, err.Error()
	}
	if online != 3 {
		return false, -1, fmt.Sprintf("%d members of the quorum queue online", online)
	}
	return true, -1, ""
}

// firstLine is err's text up to its first line break, for progress lines.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
