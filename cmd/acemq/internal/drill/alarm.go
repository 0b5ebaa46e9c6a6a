package drill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
)

// AlarmOptions sets up the alarm drill.
type AlarmOptions struct {
	// Hold is how long the memory alarm stays raised once the Conn is
	// blocked (default 3s).
	Hold time.Duration
	// SendTimeout is each Send's context deadline (default 2s); no Send may
	// outlive it.
	SendTimeout time.Duration
	// Publishers is the number of publishing goroutines (default 4).
	Publishers int
	// Watermark is what set_vm_memory_high_watermark is set back to
	// (default 0.4, RabbitMQ's default).
	Watermark string
}

func (o *AlarmOptions) defaults() {
	if o.Hold <= 0 {
		o.Hold = 3 * time.Second
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 2 * time.Second
	}
	if o.Publishers <= 0 {
		o.Publishers = 4
	}
	if o.Watermark == "" {
		o.Watermark = "0.4"
	}
}

// healthLimit bounds one Health call under the alarm. Health reads local
// state only (microseconds; health-max reports the slowest): a call that
// waited on the blocked broker would last the alarm's hold, seconds. The
// limit is far above scheduling noise on a loaded machine with -race (a
// rehearsal saw 3.7 ms against the 1 ms this once was) and far below that.
const healthLimit = 100 * time.Millisecond

// sendOverrunLimit is how far past its context's deadline a Send may
// return before the drill calls it outliving its context: scheduling
// noise on a loaded machine, not a wait.
const sendOverrunLimit = 250 * time.Millisecond

type alarmTally struct {
	mu            sync.Mutex
	confirmed     map[string]time.Time
	received      map[string]bool
	paused        int
	pausedReasons map[string]int
	ctxEnded      int
	other         int
	lastOther     error
	maxOverrun    time.Duration
	overruns      int
}

// Alarm runs the alarm drill: publishers and a consumer run while the
// broker's memory alarm is raised (set_vm_memory_high_watermark 0) and
// cleared. Under the alarm refusals must be paused with the broker's
// reason, Blocked() true, and Health answer UP in under a millisecond;
// publishing must resume within a second of the alarm clearing (from the
// broker's connection.unblocked reaching the Conn: rabbitmqctl itself takes
// a second or more to start, which is not the library's time); no Send
// may outlive its context; nothing confirmed may be lost.
func Alarm(ctx context.Context, env Env, o AlarmOptions) *Result {
	o.defaults()
	res := newResult("alarm")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	if err := alarm(ctx, env, o, res); err != nil {
		res.Failf("%v", err)
	}
	return res
}

func alarm(ctx context.Context, env Env, o AlarmOptions, res *Result) error {
	unblocked := make(chan time.Time, 4)
	c, err := env.connect(ctx, acemq.Config{OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventUnblocked {
			select {
			case unblocked <- e.At:
			default:
			}
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := unique("drill.alarm")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	t := &alarmTally{confirmed: map[string]time.Time{}, received: map[string]bool{}, pausedReasons: map[string]int{}}
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[crashMsg]) acemq.Decision {
		t.mu.Lock()
		t.received[m.Envelope.ID] = true
		t.mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 4})
	if err != nil {
		return err
	}
	defer k.Close(context.Background())

	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Stop the publishers, then wait for them (defers run last-first).
	defer func() { stopPub(); wg.Wait() }()
	pub := acemq.NewPublisher[crashMsg](c, "", q, acemq.PublisherConfig{})
	for w := 0; w < o.Publishers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; pubCtx.Err() == nil; seq++ {
				sctx, cancel := context.WithTimeout(pubCtx, o.SendTimeout)
				begun := time.Now()
				sent, err := pub.Send(sctx, crashMsg{Seq: seq})
				took := time.Since(begun)
				cancel()
				t.mu.Lock()
				if over := took - o.SendTimeout; over > t.maxOverrun {
					t.maxOverrun = over
				}
				if took-o.SendTimeout > sendOverrunLimit {
					t.overruns++
				}
				var pp *acemq.PublishingPausedError
				switch {
				case err == nil:
					t.confirmed[sent.Envelope.ID] = time.Now()
				case pubCtx.Err() != nil:
				case errors.As(err, &pp):
					t.paused++
					t.pausedReasons[pp.BrokerReason]++
				case errors.Is(err, context.DeadlineExceeded):
					t.ctxEnded++
				default:
					t.other++
					t.lastOther = err
				}
				t.mu.Unlock()
				pace := 2 * time.Millisecond
				if err != nil {
					pace = 10 * time.Millisecond
				}
				_ = sleepCtx(pubCtx, pace)
			}
		}()
	}

	if err := sleepCtx(ctx, time.Second); err != nil {
		return err
	}
	raised := false
	defer func() {
		if raised {
			_, _ = env.ctl(context.Background(), "set_vm_memory_high_watermark", o.Watermark)
		}
	}()
	raised = true
	if _, err := env.ctl(ctx, "set_vm_memory_high_watermark", "0"); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); !c.Blocked(); {
		if time.Now().After(deadline) {
			return errors.New("the Conn did not report Blocked within 30s of the memory alarm")
		}
		_ = sleepCtx(ctx, time.Millisecond) // Blocked has no change event of its own here
	}
	res.Set("blocked-reason", fmt.Sprintf("%q", c.Health(ctx).BlockedReason))

	// Health under the alarm: local state only, so fast, and UP.
	var slowest time.Duration
	healthDown := 0
	for i := 0; i < 1000; i++ {
		begun := time.Now()
		h := c.Health(ctx)
		if d := time.Since(begun); d > slowest {
			slowest = d
		}
		if h.Status != acemq.StatusUp {
			healthDown++
		}
	}
	res.Set("health-max", slowest.Round(time.Microsecond))
	if slowest >= healthLimit {
		res.Failf("a health check took %s under the alarm, want < %s: it waited on the blocked broker", ms(slowest), ms(healthLimit))
	}
	if healthDown > 0 {
		res.Failf("%d of 1000 health checks under the alarm did not say UP", healthDown)
	}
	// Publishes written just before the broker said "blocked" are held
	// until their context ends; the refusals come after them.
	for deadline := time.Now().Add(o.SendTimeout + 10*time.Second); ; {
		t.mu.Lock()
		n := t.paused
		t.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no publish was refused as paused under the alarm")
		}
		_ = sleepCtx(ctx, time.Millisecond)
	}
	if err := sleepCtx(ctx, o.Hold); err != nil {
		return err
	}
	if !c.Blocked() {
		res.Failf("Blocked() turned false while the alarm was still raised")
	}
	t.mu.Lock()
	pausedDuring := t.paused
	t.mu.Unlock()

	if _, err := env.ctl(ctx, "set_vm_memory_high_watermark", o.Watermark); err != nil {
		return err
	}
	raised = false
	var clearedAt time.Time
	select {
	case clearedAt = <-unblocked:
	case <-time.After(30 * time.Second):
		return errors.New("the Conn was not told the alarm cleared within 30s")
	}
	var resumedAt time.Time
	for deadline := clearedAt.Add(10 * time.Second); time.Now().Before(deadline); {
		t.mu.Lock()
		resumedAt, _ = firstAfter(t.confirmed, clearedAt)
		t.mu.Unlock()
		if !resumedAt.IsZero() {
			break
		}
		_ = sleepCtx(ctx, time.Millisecond)
	}
	_ = sleepCtx(ctx, 500*time.Millisecond)
	stopPub()
	wg.Wait()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		t.mu.Lock()
		all := true
		for id := range t.confirmed {
			if !t.received[id] {
				all = false
				break
			}
		}
		t.mu.Unlock()
		if all {
			break
		}
		_ = sleepCtx(ctx, 10*time.Millisecond)
	}
	if err := k.Close(context.Background()); err != nil {
		res.Failf("closing the consumer: %v", err)
	}
	left, err := drainIDs(ctx, c, q)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lost := 0
	for id := range t.confirmed {
		if !t.received[id] && left[id] == 0 {
			lost++
		}
	}
	res.Set("confirmed", len(t.confirmed))
	res.Set("lost", lost)
	res.Set("paused", t.paused)
	res.Set("send-ctx-ended", t.ctxEnded)
	res.Set("other", t.other)
	res.Set("max-send-past-deadline", ms(max(t.maxOverrun, 0)))
	if resumedAt.IsZero() {
		res.Set("resumed-after-clear", "never")
		res.Failf("no publish was confirmed within 10s of clearing the alarm")
	} else {
		res.Set("resumed-after-clear", ms(resumedAt.Sub(clearedAt)))
		if c.Blocked() {
			res.Failf("Blocked() is still true after the alarm cleared")
		}
		if resumedAt.Sub(clearedAt) > time.Second {
			res.Failf("publishing resumed %s after the alarm cleared, want within 1s", ms(resumedAt.Sub(clearedAt)))
		}
	}
	if pausedDuring == 0 {
		res.Failf("no publish was refused as paused under the alarm")
	}
	for reason, n := range t.pausedReasons {
		if reason == "" {
			res.Failf("%d paused refusals carried no broker reason", n)
		}
	}
	if lost > 0 {
		res.Failf("%d confirmed messages lost", lost)
	}
	if t.other > 0 {
		res.Failf("%d publish errors of no known kind, the last: %v", t.other, t.lastOther)
	}
	if t.overruns > 0 {
		res.Failf("%d Sends returned more than %s after their context's deadline", t.overruns, sendOverrunLimit)
	}
	return nil
}
