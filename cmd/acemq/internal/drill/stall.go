package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

// StallOptions sets up the stall drill.
type StallOptions struct {
	// Publishers is the number of publishing goroutines whose every Send
	// has a deadline (default 16).
	Publishers int
	// Size is each message's body in bytes (default 8 MiB): large enough
	// that the socket buffers fill once the broker stops reading.
	Size int
	// SendTimeout is each Send's context deadline (default 2s).
	SendTimeout time.Duration
	// StopAfter is how long the publishers run before each stop (default 2s);
	// the first stop also waits for a first confirmed Send (up to Recover).
	StopAfter time.Duration
	// Hold is how long the broker stays stopped the first time, before it
	// is resumed and the Conn must recover (default 6s).
	Hold time.Duration
	// CloseAfter is how long the broker has been stopped the second time
	// when Close is called, with a Send that has no deadline blocked in
	// its write (default 4s).
	CloseAfter time.Duration
	// CloseTimeout is Close's context deadline (default 3s).
	CloseTimeout time.Duration
	// Slack is how far past its deadline a Send or Close may return
	// before the drill fails: scheduling on a loaded machine, not a wait
	// (default 1s).
	Slack time.Duration
	// Recover bounds the wait, once the broker runs again, for a Send to
	// be confirmed (default 30s).
	Recover time.Duration
	// Unbounded is the number of Sends without a deadline blocked in their
	// writes when Close is called (default 16: more than the socket
	// buffers take, so some are blocked in the write itself).
	Unbounded int
	// PID is the broker's operating-system process; 0 asks rabbitmqctl
	// (os:getpid() on the node --ctl names).
	PID int
}

func (o *StallOptions) defaults() {
	if o.Publishers <= 0 {
		o.Publishers = 16
	}
	if o.Size <= 0 {
		o.Size = 8 << 20
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 2 * time.Second
	}
	if o.StopAfter <= 0 {
		o.StopAfter = 2 * time.Second
	}
	if o.Hold <= 0 {
		o.Hold = 6 * time.Second
	}
	if o.CloseAfter <= 0 {
		o.CloseAfter = 4 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 3 * time.Second
	}
	if o.Slack <= 0 {
		o.Slack = time.Second
	}
	if o.Recover <= 0 {
		o.Recover = 30 * time.Second
	}
	if o.Unbounded <= 0 {
		o.Unbounded = 16
	}
}

// stallTally counts what the publishers' Sends answered.
type stallTally struct {
	mu        sync.Mutex
	longest   time.Duration
	overruns  int // past the deadline by more than the slack
	late      int // past the deadline by more than 100ms
	confirmed int
	mayHave   int // failed, and may have arrived (PublishError.Sent)
	paused    int // refused while the Conn recovered: nothing written
	notSent   int // failed otherwise, certainly not sent
	unnamed   int // failed without a PublishError saying which
	lastFail  error
}

func (t *stallTally) add(took, deadline time.Duration, slack time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.longest = max(t.longest, took)
	if took > deadline+slack {
		t.overruns++
	}
	if took > deadline+100*time.Millisecond {
		t.late++
	}
	var pe *acemq.PublishError
	switch {
	case err == nil:
		t.confirmed++
	case !errors.As(err, &pe):
		t.unnamed++
		t.lastFail = err
	case pe.Sent:
		t.mayHave++
	case acemq.IsPaused(err):
		t.paused++
	default:
		t.notSent++
	}
}

// Stall runs the stall drill: a broker that stops reading. Publishers send
// large messages, each Send under a deadline, while the broker's process
// is stopped (SIGSTOP), so the socket buffers fill and writes block; no
// Send may outlive its deadline by more than the slack, and each failure
// must say whether the message may have arrived. The broker is resumed
// (SIGCONT) and a Send must be confirmed again (the Conn recovers). Then
// it is stopped again with Sends that have no deadline blocked in their
// writes (nothing else writing, so nothing but Close ends them), and Close
// must return within its context, those Sends with it. The broker is
// always resumed before the drill returns. The process must be on this
// machine, and the drill allowed to signal it.
func Stall(ctx context.Context, env Env, o StallOptions) *Result {
	o.defaults()
	res := newResult("stall")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if err := stall(ctx, env, o, res); err != nil {
		res.Failf("%v", err)
	}
	return res
}

func stall(ctx context.Context, env Env, o StallOptions, res *Result) error {
	pid := o.PID
	if pid == 0 {
		var err error
		if pid, err = brokerPID(ctx, env); err != nil {
			return err
		}
	}
	if err := checkBroker(pid); err != nil {
		return err
	}
	c, err := env.connect(ctx)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close(context.Background())
		}
	}()
	q := unique("drill.stall")
	// A queue of at most two messages (the oldest dropped), so the broker
	// keeps little of what it is sent.
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic, Args: map[string]any{"x-max-length": 2}})); err != nil {
		return err
	}
	defer func() {
		// c is closed by now: the queue goes on a connection of its own.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if dc, err := env.connect(dctx); err == nil {
			for _, name := range []string{q, q + ".dlq", q + ".parked"} {
				_, _ = dc.DeleteQueue(dctx, name)
			}
			_ = dc.Close(dctx)
		}
	}()
	body := make([]byte, o.Size)
	pub := acemq.NewPublisher[[]byte](c, "", q, acemq.PublisherConfig{Codec: acemq.Bytes()})

	stopped := false
	defer func() {
		if stopped {
			_ = signalBroker(pid, false)
		}
	}()
	pause := func() error {
		if err := signalBroker(pid, true); err != nil {
			return err
		}
		stopped = true
		env.logf("stall: broker process %d stopped", pid)
		return nil
	}
	resume := func() error {
		stopped = false
		if err := signalBroker(pid, false); err != nil {
			return err
		}
		env.logf("stall: broker process %d resumed", pid)
		return nil
	}

	// The first stall: every Send bounded by its deadline, then recovery.
	t := &stallTally{}
	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopPub(); wg.Wait() }()
	publish := func() {
		defer wg.Done()
		for pubCtx.Err() == nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.SendTimeout)
			begun := time.Now()
			_, err := pub.Send(sctx, body)
			took := time.Since(begun)
			cancel()
			t.add(took, o.SendTimeout, o.Slack, err)
			if err != nil {
				_ = sleepCtx(pubCtx, 50*time.Millisecond)
			}
		}
	}
	for range o.Publishers {
		wg.Add(1)
		go publish()
	}
	if err := sleepCtx(ctx, o.StopAfter); err != nil {
		return err
	}
	// The broker is stopped with publishing under way: after StopAfter and
	// a first confirm (a busy broker took over a second to confirm its
	// first 8 MiB message, and the drill then proved nothing).
	for waited := time.Now(); ; {
		t.mu.Lock()
		confirmed := t.confirmed
		t.mu.Unlock()
		if confirmed > 0 {
			break
		}
		if time.Since(waited) > o.Recover {
			return fmt.Errorf("no Send was confirmed within %s of publishing: the broker does not take these messages", o.Recover+o.StopAfter)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	if err := pause(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, o.Hold); err != nil {
		return err
	}
	if err := resume(); err != nil {
		return err
	}
	resumed := time.Now()
	recovered := time.Duration(-1)
	for time.Since(resumed) < o.Recover && ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, o.SendTimeout)
		_, err := pub.Send(sctx, body[:1])
		cancel()
		if err == nil {
			recovered = time.Since(resumed)
			break
		}
		_ = sleepCtx(ctx, 50*time.Millisecond)
	}
	if recovered < 0 {
		res.Failf("no Send was confirmed within %s of the broker running again", o.Recover)
	} else {
		res.Set("recovered", recovered.Round(time.Millisecond))
	}

	// The second stall: Sends without a deadline blocked in their writes
	// (nothing else writes, so nothing ends them but Close), and Close
	// bounded by its context.
	stopPub()
	wg.Wait()
	type ended struct {
		at  time.Time
		err error
	}
	unbounded := make(chan ended, o.Unbounded)
	for range o.Unbounded {
		go func() {
			for {
				// Confirmed until the broker stops; then blocked in its
				// write until Close ends it.
				if _, err := pub.Send(context.Background(), body); err != nil {
					unbounded <- ended{time.Now(), err}
					return
				}
			}
		}()
	}
	if err := sleepCtx(ctx, o.StopAfter); err != nil {
		return err
	}
	if err := pause(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, o.CloseAfter); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.Background(), o.CloseTimeout)
	begun := time.Now()
	cerr := c.Close(cctx)
	took := time.Since(begun)
	closedAt := time.Now()
	cancel()
	closed = true
	res.Set("close", took.Round(time.Millisecond))
	if took > o.CloseTimeout+o.Slack {
		res.Failf("Close took %s with the broker stopped, past its %s context", took.Round(time.Millisecond), o.CloseTimeout)
	}
	if cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		res.Failf("Close answered %v", cerr)
	}
	late, blockedAtClose := time.Duration(0), 0
	for range o.Unbounded {
		select {
		case e := <-unbounded:
			if e.at.After(begun) {
				blockedAtClose++
			}
			late = max(late, e.at.Sub(closedAt))
			if e.err == nil {
				res.Failf("a Send without a deadline was answered confirmed")
			}
		case <-time.After(o.Slack):
			res.Failf("a Send without a deadline blocked in its write had not returned %s after Close did", o.Slack)
		}
	}
	res.Set("blocked-at-close", blockedAtClose)
	if late > o.Slack {
		res.Failf("a Send without a deadline returned %s after Close did", late.Round(time.Millisecond))
	}
	if blockedAtClose == 0 {
		res.Failf("no Send was still blocked when Close was called: the second stall did not block a write")
	}
	if err := resume(); err != nil {
		return err
	}
	wg.Wait()

	t.mu.Lock()
	defer t.mu.Unlock()
	res.Set("sends", t.confirmed+t.mayHave+t.paused+t.notSent+t.unnamed)
	res.Set("confirmed", t.confirmed)
	res.Set("may-have-arrived", t.mayHave)
	res.Set("not-sent", t.notSent)
	res.Set("paused", t.paused)
	res.Set("longest-send", t.longest.Round(time.Millisecond))
	res.Set("sends-over-100ms-late", t.late)
	if t.unnamed > 0 {
		res.Failf("%d failed Sends did not say whether the message may have arrived (no PublishError), the last: %v", t.unnamed, t.lastFail)
	}
	if t.overruns > 0 {
		res.Failf("%d Sends outlived their %s deadline by more than %s (longest %s)", t.overruns, o.SendTimeout, o.Slack, t.longest.Round(time.Millisecond))
	}
	if t.mayHave+t.notSent+t.paused == 0 {
		res.Failf("no Send failed while the broker was stopped: the stall did not block a write")
	}
	if t.confirmed == 0 {
		res.Failf("no Send was confirmed before the broker was stopped")
	}
	return nil
}

// brokerPID asks the node --ctl names for its operating-system process.
func brokerPID(ctx context.Context, env Env) (int, error) {
	out, err := env.ctl(ctx, "eval", "os:getpid().")
	if err != nil {
		return 0, err
	}
	s := strings.Trim(strings.TrimSpace(out), `"`)
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("acemq: rabbitmqctl eval os:getpid() answered %q, not a process id; give the broker's process with --pid", strings.TrimSpace(out))
	}
	return pid, nil
}

// checkBroker refuses a process that is not an Erlang VM, where /proc
// says so: the drill stops the process it is given.
func checkBroker(pid int) error {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self"); serr == nil {
				return fmt.Errorf("acemq: there is no process %d on this machine; the stall drill stops the broker's process, so it runs where the broker does", pid)
			}
		}
		return nil // no /proc: nothing to check
	}
	if !strings.Contains(string(cmdline), "beam") {
		return fmt.Errorf("acemq: process %d is not an Erlang VM (%q); give the broker's process with --pid", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return nil
}
