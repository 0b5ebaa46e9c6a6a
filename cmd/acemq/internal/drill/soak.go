package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

// SoakOptions sets up the soak drill.
type SoakOptions struct {
	// Reconnects is how many times every connection is force-closed
	// (default 240).
	Reconnects int
	// WarmUp is how many of them pass before the warm-up sample (default
	// a tenth of Reconnects, at least 1).
	WarmUp int
	// Every is the soak's own pace: a forced close is issued no sooner than
	// this after the previous one, and never before the Conn has recovered
	// and confirmed a publish since (default 1.5s). The library's own 1 s
	// first recovery interval is left as it is.
	Every time.Duration
	// Rate is the steady publish rate in messages per second (default 200).
	Rate int
	// Close is how each reconnect is forced: CloseServer (the broker
	// closes one of the Conn's connections: connection.close, through the
	// management API or rabbitmqctl), CloseCut (the soak's own proxy ends
	// both TCP connections, no connection.close) or CloseMixed (the two in
	// turn, a server close first; the default).
	Close string
}

// The soak's ways of forcing a reconnect (SoakOptions.Close).
const (
	CloseServer = "server"
	CloseCut    = "cut"
	CloseMixed  = "mixed"
)

func (o *SoakOptions) defaults() {
	if o.Reconnects <= 0 {
		o.Reconnects = 240
	}
	if o.WarmUp <= 0 {
		o.WarmUp = max(1, o.Reconnects/10)
	}
	if o.Every <= 0 {
		o.Every = 1500 * time.Millisecond
	}
	if o.Rate <= 0 {
		o.Rate = 200
	}
	if o.Close == "" {
		o.Close = CloseMixed
	}
}

// Sample is the process's footprint at one moment.
type Sample struct {
	RSS        int64 // bytes, from /proc/self/status
	FDs        int
	Goroutines int
	Heap       uint64 // HeapAlloc after a forced GC
}

func (s Sample) String() string {
	return fmt.Sprintf("rss %.1fMB fds %d goroutines %d heap %.1fMB", float64(s.RSS)/1e6, s.FDs, s.Goroutines, float64(s.Heap)/1e6)
}

// TakeSample measures this process after a forced GC. Goroutines and fds
// are the least of a few readings 20 ms apart, so one that is just
// starting or ending is not counted as growth.
func TakeSample() Sample {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s := Sample{Heap: m.HeapAlloc, RSS: rss(), FDs: fds(), Goroutines: runtime.NumGoroutine()}
	for i := 0; i < 4; i++ {
		time.Sleep(20 * time.Millisecond) // spacing between readings, not a wait for a condition
		s.FDs = min(s.FDs, fds())
		s.Goroutines = min(s.Goroutines, runtime.NumGoroutine())
	}
	return s
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func fds() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// growth is the relative change from a to b.
func growth(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return (b - a) / a
}

// Soak runs the soak drill: a steady publish/consume load while the drill's
// Conn is forced to reconnect o.Reconnects times, at the pace o.Every, by a
// server close, a cut of its TCP connections, or both in turn (o.Close).
// The Conn reaches the broker through a small TCP proxy in the drill, which
// cuts, and which tells the management API's connection tracking which
// connections are the drill's. A server close goes through the management
// API when env.Management is set (the drill's own connection only), else
// rabbitmqctl close_all_connections (every client's). The process is
// sampled at the start, after o.WarmUp reconnects and at the end; the
// verdict is "flat" when the Go heap after a forced GC and the RSS grew at
// most 10 % after the warm-up and neither fds nor goroutines grew at all;
// nothing confirmed may be lost. A bad URL or option fails the Result,
// saying what was wrong.
func Soak(ctx context.Context, env Env, o SoakOptions) *Result {
	o.defaults()
	res := newResult("soak")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if err := soak(ctx, env, o, res); err != nil {
		res.Failf("%v", err)
	}
	return res
}

func soak(ctx context.Context, env Env, o SoakOptions, res *Result) error {
	switch o.Close {
	case CloseServer, CloseCut, CloseMixed:
	default:
		return fmt.Errorf("acemq: the soak forces reconnects by %q, %q or %q, not %q", CloseServer, CloseCut, CloseMixed, o.Close)
	}
	first := TakeSample()
	proxy, err := startProxy(&env)
	if err != nil {
		return err
	}
	// Stopped after the Conn is closed (defers run last-first).
	defer proxy.stop()
	recovered := make(chan acemq.Event, 16)
	clientName := unique("acemq-soak")
	c, err := env.connect(ctx, acemq.Config{ClientName: clientName, OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventRecovered || e.Kind == acemq.EventGaveUp {
			select {
			case recovered <- e:
			default:
			}
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := unique("drill.soak")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	// Bookkeeping is allocated up front (one bit per message) so that the
	// drill's own records do not show as growth in the samples.
	// Enough for the planned pace, and for every second the drill may run:
	// on a loaded machine cycles take longer than planned, and a publisher
	// that ran out of numbers would stop confirming mid-drill.
	capacity := o.Rate*int(time.Duration(o.Reconnects)*(o.Every+2*time.Second)/time.Second) + 10*o.Rate
	if deadline, ok := ctx.Deadline(); ok {
		capacity = max(capacity, o.Rate*int(time.Until(deadline)/time.Second+1)+10*o.Rate)
	}
	var mu sync.Mutex
	confirmed, received := newBits(capacity), newBits(capacity)
	var lastConfirm time.Time
	paused, maybeLost, other := 0, 0, 0
	exhausted := false // the publisher used every sequence number
	var lastOther error
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[crashMsg]) acemq.Decision {
		mu.Lock()
		received.set(m.Payload.Seq)
		mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	consumerOpen := true
	defer func() {
		if consumerOpen {
			_ = k.Close(context.Background())
		}
	}()
	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Stop the publishers, then wait for them (defers run last-first).
	defer func() { stopPub(); wg.Wait() }()
	pub := acemq.NewPublisher[crashMsg](c, "", q, acemq.PublisherConfig{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(o.Rate))
		defer tick.Stop()
		for seq := 0; seq < capacity; seq++ {
			select {
			case <-pubCtx.Done():
				return
			case <-tick.C:
			}
			sctx, cancel := context.WithTimeout(pubCtx, 5*time.Second)
			sent, err := pub.Send(sctx, crashMsg{Seq: seq})
			cancel()
			var pe *acemq.PublishError
			mu.Lock()
			switch {
			case err == nil:
				_ = sent
				confirmed.set(seq)
				lastConfirm = time.Now()
			case pubCtx.Err() != nil:
			case acemq.IsPaused(err):
				paused++
			case errors.As(err, &pe) && pe.Sent:
				maybeLost++
			default:
				other++
				lastOther = err
			}
			mu.Unlock()
		}
		mu.Lock()
		exhausted = true
		mu.Unlock()
	}()
	confirmedSince := func(at time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		return lastConfirm.After(at)
	}

	var closer *mgmtCloser
	if env.Management != "" {
		// Closing either of the Conn's two connections makes it recover
		// both (it drops the other itself), so one listed is enough.
		if closer, err = newMgmtCloser(env.Management, clientName+" (", urlUser(env.URL), 1); err != nil {
			return err
		}
		defer closer.stop()
	}
	var warm Sample
	done, serverCloses, cuts := 0, 0, 0
	var cycleSum, cycleMax time.Duration
	cycles := func() error {
		for i := 1; i <= o.Reconnects; i++ {
			closedAt := time.Now()
			if o.Close == CloseCut || (o.Close == CloseMixed && i%2 == 0) {
				if proxy.cut() == 0 {
					return fmt.Errorf("reconnect %d: the soak's proxy had no connection to cut", i)
				}
				cuts++
			} else {
				if err := env.forceReconnect(ctx, closer, proxy.brokerSides, "acemq soak drill"); err != nil {
					return err
				}
				serverCloses++
			}
			select {
			case e := <-recovered:
				if e.Kind == acemq.EventGaveUp {
					return fmt.Errorf("reconnect %d: the Conn gave up recovering: %v", i, e.Err)
				}
			case <-time.After(60 * time.Second):
				return fmt.Errorf("reconnect %d: the Conn did not recover within 60s", i)
			case <-ctx.Done():
				return ctx.Err()
			}
			for deadline := time.Now().Add(30 * time.Second); !confirmedSince(closedAt); {
				if time.Now().After(deadline) {
					mu.Lock()
					ranOut := exhausted
					mu.Unlock()
					if ranOut {
						return fmt.Errorf("reconnect %d: the drill's publisher used all %d sequence numbers it had room for and stopped; run fewer --reconnects or a lower --rate", i, capacity)
					}
					return fmt.Errorf("reconnect %d: no publish confirmed within 30s of recovering", i)
				}
				_ = sleepCtx(ctx, 5*time.Millisecond)
			}
			if i == o.WarmUp {
				warm = TakeSample()
				env.logf("soak: warm-up sample after %d reconnects: %s", i, warm)
			}
			if i%20 == 0 {
				env.logf("soak: %d of %d reconnects", i, o.Reconnects)
			}
			if err := sleepCtx(ctx, time.Until(closedAt.Add(o.Every))); err != nil {
				return err
			}
			done = i
			took := time.Since(closedAt)
			cycleSum += took
			cycleMax = max(cycleMax, took)
		}
		return nil
	}
	if err := cycles(); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) || warm.Heap == 0 {
			return err
		}
		// Time is up: judge what ran, and say it was cut short.
		res.Failf("the time was up after %d of %d reconnects", done, o.Reconnects)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
	}
	stopPub()
	wg.Wait()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		mu.Lock()
		all := confirmed.missingFrom(received) == 0
		mu.Unlock()
		if all {
			break
		}
		_ = sleepCtx(ctx, 10*time.Millisecond)
	}
	end := TakeSample()
	consumerOpen = false
	if err := k.Close(context.Background()); err != nil {
		res.Failf("closing the consumer: %v", err)
	}
	if err := drainSeqs(ctx, c, q, func(seq int) {
		mu.Lock()
		received.set(seq)
		mu.Unlock()
	}); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	lost := confirmed.missingFrom(received)
	heapG, rssG := growth(float64(warm.Heap), float64(end.Heap)), growth(float64(warm.RSS), float64(end.RSS))
	flat := heapG <= 0.10 && rssG <= 0.10 && end.FDs <= warm.FDs && end.Goroutines <= warm.Goroutines
	verdict := "flat"
	if !flat {
		verdict = "growing"
	}
	res.Set("reconnects", done)
	res.Set("every", o.Every)
	server := "rabbitmqctl"
	if closer != nil {
		server = fmt.Sprintf("management-api(%d-by-address,%d-by-name)", closer.byAddress, closer.byName)
	}
	res.Set("closes", fmt.Sprintf("server:%d/%s+cut:%d", serverCloses, server, cuts))
	if done > 0 {
		res.Set("cycle-mean/max", fmt.Sprintf("%s/%s", (cycleSum/time.Duration(done)).Round(time.Millisecond), cycleMax.Round(time.Millisecond)))
	}
	res.Set("rate", fmt.Sprintf("%d/s", o.Rate))
	res.Set("memory", verdict)
	res.Set("rss-MB", fmt.Sprintf("%.1f→%.1f→%.1f", float64(first.RSS)/1e6, float64(warm.RSS)/1e6, float64(end.RSS)/1e6))
	res.Set("heap-MB", fmt.Sprintf("%.2f→%.2f→%.2f", float64(first.Heap)/1e6, float64(warm.Heap)/1e6, float64(end.Heap)/1e6))
	res.Set("fds", fmt.Sprintf("%d→%d→%d", first.FDs, warm.FDs, end.FDs))
	res.Set("goroutines", fmt.Sprintf("%d→%d→%d", first.Goroutines, warm.Goroutines, end.Goroutines))
	res.Set("confirmed", confirmed.count())
	res.Set("lost", lost)
	res.Set("paused", paused)
	res.Set("may-have-been-lost", maybeLost)
	res.Set("other", other)
	if !flat {
		res.Failf("memory is not flat after the warm-up: heap %+.1f%%, RSS %+.1f%%, fds %d→%d, goroutines %d→%d (limits +10%%, +10%%, no growth, no growth)",
			100*heapG, 100*rssG, warm.FDs, end.FDs, warm.Goroutines, end.Goroutines)
	}
	if lost > 0 {
		res.Failf("%d confirmed messages lost", lost)
	}
	if other > 0 {
		res.Failf("%d publish errors of no known kind, the last: %v", other, lastOther)
	}
	return nil
}

// startProxy starts the soak's proxy to env's broker and points env.URL
// at it.
func startProxy(env *Env) (*cutProxy, error) {
	// The proxy's address is not known until it listens; the target is.
	_, target, err := throughProxy(env.URL, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p, err := newCutProxy(target)
	if err != nil {
		return nil, err
	}
	if env.URL, _, err = throughProxy(env.URL, p.addr()); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// bits is a fixed set of small non-negative integers.
type bits []uint64

func newBits(n int) bits { return make(bits, (n+63)/64) }

func (b bits) set(i int) {
	if i >= 0 && i/64 < len(b) {
		b[i/64] |= 1 << (i % 64)
	}
}

func (b bits) count() int {
	n := 0
	for _, w := range b {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// missingFrom counts the members of b that other lacks.
func (b bits) missingFrom(other bits) int {
	n := 0
	for i, w := range b {
		for w &^= other[i]; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// drainSeqs takes every message off queue, acking each, and hands f the
// sequence number in its body.
func drainSeqs(ctx context.Context, c *acemq.Conn, queue string, f func(seq int)) error {
	p, err := c.NewPuller(ctx)
	if err != nil {
		return err
	}
	defer p.Close()
	for {
		m, ok, err := p.Pull(ctx, queue)
		if err != nil || !ok {
			return err
		}
		var msg crashMsg
		if json.Unmarshal(m.Body, &msg) == nil {
			f(msg.Seq)
		}
		if err := m.Ack(); err != nil {
			return err
		}
	}
}
