package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq"
)

// The partition drill's path workload (issue 39): messages that pass
// through the library's own queues while the faults run. Each confirmed
// message is retried once with a wait held in the broker (a rung,
// {q}.retry.{wait}); after the wait a third of them are accepted, a third
// rejected into {q}.dlq and a third parked into {q}.parked, where they
// stay until the end. One workload per layout, each on a Conn of its own
// with that Config.Layout, so a run compares the classic layout (classic
// rungs and set-aside queues, on one node each) with the replicated one
// (quorum queues, at-least-once dead-lettering out of the rungs).
//
// For each confirmed message the workload records where it went: into the
// wait (the handler retried attempt 1, which the engine moves to the rung
// with a confirmed copy before it acks), out of the wait (attempt 2
// delivered), into a dead-letter queue (rejected or parked at attempt 2)
// and what the dead-letter queues hold at the end. Lost is a message that
// entered the wait and never came out, or that entered a dead-letter queue
// and is not in it at the end; duplicated is one that ended twice.

// pathClasses are where a path message ends, by its number modulo 3.
var pathClasses = [3]string{"accepted", "dlq", "parked"}

// pathWorkload is one layout's publisher, consumer and ledger.
type pathWorkload struct {
	layout acemq.Layout
	conn   *acemq.Conn
	queue  string
	wait   time.Duration

	mu        sync.Mutex
	confirmed map[string]bool
	waited    map[string]int // retried at attempt 1: into the wait
	after     map[string]int // delivered at attempt 2 or later: out of the wait
	ended     map[string]int // accepted after the wait
	setAside  map[string]int // rejected or parked after the wait
	held      map[string]int // found in {q}.dlq or {q}.parked at the end
	progress  chan struct{}
	consumer  *acemq.Consumer
	rungWaits *atomic.Int64 // retries the engine held on the rung (Settlement.InBroker)
}

// PathCounts is what one layout's path workload saw.
type PathCounts struct {
	Confirmed int
	// WaitEntered counts messages that entered the retry wait; WaitLost
	// those never delivered after it.
	WaitEntered, WaitLost int
	// DLQEntered counts messages rejected or parked after the wait (into
	// {q}.dlq or {q}.parked); DLQLost those not found there at the end.
	DLQEntered, DLQLost int
	// Unhandled counts confirmed messages never delivered at all (lost on
	// the source queue, a quorum queue in both layouts).
	Unhandled int
	// Duplicated counts messages that ended more than once (accepted
	// twice, or held twice in a dead-letter queue).
	Duplicated int
}

// Lost is every loss on the path.
func (p PathCounts) Lost() int { return p.WaitLost + p.DLQLost + p.Unhandled }

func (p PathCounts) String() string {
	return fmt.Sprintf("wait %d/%d lost, dlq %d/%d lost, unhandled %d, dup %d", p.WaitEntered, p.WaitLost, p.DLQEntered, p.DLQLost, p.Unhandled, p.Duplicated)
}

func newPathWorkload(c *acemq.Conn, queue string, wait time.Duration) *pathWorkload {
	return &pathWorkload{layout: c.Config().Layout, conn: c, queue: queue, wait: wait, rungWaits: new(atomic.Int64),
		confirmed: map[string]bool{}, waited: map[string]int{}, after: map[string]int{}, ended: map[string]int{},
		setAside: map[string]int{}, held: map[string]int{}, progress: make(chan struct{}, 1)}
}

func (w *pathWorkload) note(m map[string]int, id string) {
	w.mu.Lock()
	m[id]++
	w.mu.Unlock()
	select {
	case w.progress <- struct{}{}:
	default:
	}
}

// pathClass is where message id ends: its number after the last '-'.
func pathClass(id string) string {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return pathClasses[n%3]
}

// policy retries once, after wait, held on a rung whatever its length.
func (w *pathWorkload) policy() acemq.RetryPolicy {
	return acemq.Fixed(2, w.wait).WaitInBrokerFrom(w.wait)
}

// start declares the source queue with its dead-letter wiring and starts
// the consumer.
func (w *pathWorkload) start(ctx context.Context) error {
	t := acemq.NewTopology().Queue(w.queue, acemq.QueueOptions{}).DeadLetters(w.queue).Retries(w.queue, w.policy())
	if err := w.conn.Apply(ctx, t); err != nil {
		return fmt.Errorf("declare the %s path: %w", w.layout, err)
	}
	k, err := acemq.Consume(ctx, w.conn, w.queue, func(_ context.Context, m *acemq.Message[partID]) acemq.Decision {
		id := m.Payload.ID
		if m.Envelope.Attempt <= 1 {
			w.note(w.waited, id)
			return acemq.Retry(errors.New("the drill's wait in the broker"))
		}
		w.note(w.after, id)
		switch pathClass(id) {
		case "dlq":
			w.note(w.setAside, id)
			return acemq.Reject(errors.New("the drill's dead letter"))
		case "parked":
			w.note(w.setAside, id)
			return acemq.Park(errors.New("the drill's parked message"))
		}
		w.note(w.ended, id)
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 50, Concurrency: 2, Retry: w.policy()})
	if err != nil {
		return fmt.Errorf("consume the %s path: %w", w.layout, err)
	}
	w.consumer = k
	return nil
}

// publish sends ids prefix0, prefix1, ... until ctx ends, as publishOne.
func (w *pathWorkload) publish(ctx context.Context, prefix string, pause time.Duration) {
	p := acemq.NewPublisher[partID](w.conn, "", w.queue, acemq.PublisherConfig{})
	led := newPartLedger()
	for i := 0; ctx.Err() == nil; i++ {
		if sleepCtx(ctx, pause) != nil {
			return
		}
		id := fmt.Sprintf("%s%d", prefix, i)
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := p.SendWith(sctx, partID{ID: id}, acemq.SendOptions{Envelope: &acemq.Envelope{ID: id}})
			cancel()
			if err == nil {
				w.mu.Lock()
				w.confirmed[id] = true
				w.mu.Unlock()
				break
			}
			if !recordFailure(ctx, led, id, err) {
				return
			}
		}
	}
}

// open lists the confirmed messages not yet at their end: never out of
// the wait, or accepted-class ones not accepted yet.
func (w *pathWorkload) open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for id := range w.confirmed {
		switch {
		case w.after[id] == 0:
			n++
		case pathClass(id) == "accepted" && w.ended[id] == 0:
			n++
		case pathClass(id) != "accepted" && w.setAside[id] == 0:
			n++
		}
	}
	return n
}

// settle waits until every confirmed message reached its end, or until
// no message moved for idle (a rung whose dead-lettering failed tries
// again on RabbitMQ only after about three minutes).
func (w *pathWorkload) settle(ctx context.Context, idle time.Duration) {
	for w.open() > 0 {
		t := time.NewTimer(idle)
		select {
		case <-w.progress:
			t.Stop()
		case <-t.C:
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// finish stops the consumer, reads {q}.dlq and {q}.parked and counts.
func (w *pathWorkload) finish(ctx context.Context) (PathCounts, error) {
	if w.consumer != nil {
		_ = w.consumer.Close(ctx)
	}
	for _, q := range []string{acemq.DeadLetterQueue(w.queue), acemq.ParkedQueue(w.queue)} {
		seen, err := drainIDs(ctx, w.conn, q)
		if err != nil {
			return PathCounts{}, fmt.Errorf("read %s: %w", q, err)
		}
		w.mu.Lock()
		for id, n := range seen {
			w.held[id] += n
		}
		w.mu.Unlock()
	}
	return w.count(), nil
}

func (w *pathWorkload) count() PathCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := PathCounts{Confirmed: len(w.confirmed)}
	for id := range w.confirmed {
		if w.waited[id] == 0 && w.after[id] == 0 {
			c.Unhandled++
			continue
		}
		c.WaitEntered++
		if w.after[id] == 0 {
			c.WaitLost++
			continue
		}
		if pathClass(id) == "accepted" {
			if w.ended[id] > 1 {
				c.Duplicated++
			}
			continue
		}
		if w.setAside[id] == 0 {
			continue // out of the wait, not yet decided: counted open, not lost here
		}
		c.DLQEntered++
		switch {
		case w.held[id] == 0:
			c.DLQLost++
		case w.held[id] > 1:
			c.Duplicated++
		}
	}
	return c
}

// lostIDs lists up to n ids lost on the path, for the progress lines.
func (w *pathWorkload) lostIDs(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for id := range w.confirmed {
		lost := w.after[id] == 0 || (pathClass(id) != "accepted" && w.setAside[id] > 0 && w.held[id] == 0)
		if lost {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// cleanup deletes the workload's queues.
func (w *pathWorkload) cleanup(ctx context.Context) {
	for _, q := range []string{w.queue, acemq.DeadLetterQueue(w.queue), acemq.ParkedQueue(w.queue), acemq.RetryQueue(w.queue, w.wait)} {
		_, _ = w.conn.DeleteQueue(ctx, q)
	}
}

// pathRun is the path workloads of one partition run, one per layout.
type pathRun struct {
	loads []*pathWorkload
	conns []*acemq.Conn
}

// startPaths connects one Conn per layout (trying the nodes in order) and
// starts its workload.
func startPaths(ctx context.Context, first string, addrs []string, o PartitionOptions) (*pathRun, error) {
	pr := &pathRun{}
	for _, layout := range []acemq.Layout{acemq.ClassicLayout, acemq.ReplicatedLayout} {
		var rungWaits atomic.Int64
		onSettle := func(s acemq.Settlement) {
			if s.Outcome == acemq.ConsumeRetried && s.InBroker {
				rungWaits.Add(1)
			}
		}
		c, err := acemq.Connect(ctx, first, acemq.Config{Addresses: addrs, ClientName: unique("acemq-partition-path-" + string(layout)), Layout: layout, Logger: slog.New(slog.DiscardHandler), OnSettlement: onSettle})
		if err != nil {
			pr.close(ctx)
			return nil, fmt.Errorf("connect the %s path: %w", layout, err)
		}
		pr.conns = append(pr.conns, c)
		w := newPathWorkload(c, unique("drill.partition.path."+string(layout)), o.Wait)
		w.rungWaits = &rungWaits
		if err := w.start(ctx); err != nil {
			pr.close(ctx)
			return nil, err
		}
		pr.loads = append(pr.loads, w)
	}
	return pr, nil
}

// publish starts each workload's publisher on wg until ctx ends.
func (pr *pathRun) publish(ctx context.Context, wg *sync.WaitGroup, pause time.Duration) {
	for _, w := range pr.loads {
		wg.Add(1)
		go func() { defer wg.Done(); w.publish(ctx, "path-"+string(w.layout)+"-", pause) }()
	}
}

// finish lets each workload settle, counts it into r and fails r when
// the replicated layout lost a message. The classic layout's losses are
// the broker's (one node's queues under the faults), reported.
func (pr *pathRun) finish(ctx context.Context, cl Cluster, r *Result) {
	for _, w := range pr.loads {
		idle := 30 * time.Second
		if w.layout == acemq.ReplicatedLayout {
			// A rung that could not hand a message home retries about three
			// minutes later (at-least-once dead-lettering).
			idle = 200 * time.Second
		}
		w.settle(ctx, idle)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		counts, err := w.finish(fctx)
		cancel()
		if err != nil {
			r.Failf("the %s path: %v", w.layout, err)
			continue
		}
		l := string(w.layout)
		r.Set(l+"_path_confirmed", counts.Confirmed)
		r.Set(l+"_wait", fmt.Sprintf("%d/%d", counts.WaitEntered, counts.WaitLost))
		r.Set(l+"_dlq", fmt.Sprintf("%d/%d", counts.DLQEntered, counts.DLQLost))
		r.Set(l+"_path_unhandled", counts.Unhandled)
		r.Set(l+"_path_dup", counts.Duplicated)
		r.Set(l+"_rung_waits", w.rungWaits.Load())
		cl.logf("%s layout path: %d confirmed; %s", l, counts.Confirmed, counts)
		if counts.Lost() == 0 {
			continue
		}
		if w.layout == acemq.ReplicatedLayout {
			r.Failf("the replicated layout lost %d messages on the path (%s; first %v)", counts.Lost(), counts, w.lostIDs(10))
		} else {
			cl.logf("classic layout (information, not a failure): %d messages lost on the path (first %v)", counts.Lost(), w.lostIDs(10))
		}
	}
}

// close deletes the workloads' queues and closes their Conns.
func (pr *pathRun) close(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, w := range pr.loads {
		w.cleanup(dctx)
	}
	for _, c := range pr.conns {
		_ = c.Close(dctx)
	}
}
