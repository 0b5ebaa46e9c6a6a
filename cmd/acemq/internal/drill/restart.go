package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	amqp "github.com/rabbitmq/amqp091-go"
)

// RestartOptions sets up the restart drill.
type RestartOptions struct {
	// Cycles is how many times the broker is stopped and started per queue
	// type (default 3).
	Cycles int
	// Down is how long the broker stays stopped (default 1s).
	Down time.Duration
	// Publishers is the number of publishing goroutines (default 4).
	Publishers int
	// QueueTypes lists the queue types to run, each separately (default
	// classic then quorum).
	QueueTypes []acemq.QueueType
}

func (o *RestartOptions) defaults() {
	if o.Cycles <= 0 {
		o.Cycles = 3
	}
	if o.Down <= 0 {
		o.Down = time.Second
	}
	if o.Publishers <= 0 {
		o.Publishers = 4
	}
	if len(o.QueueTypes) == 0 {
		o.QueueTypes = []acemq.QueueType{acemq.Classic, acemq.Quorum}
	}
}

// amqpAddr is the host:port of a broker URL.
func amqpAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("acemq: cannot read a host from the broker URL (%v)", err)
	}
	port := u.Port()
	if port == "" {
		port = "5672"
		if u.Scheme == "amqps" {
			port = "5671"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// waitAccepting returns the moment addr first accepts a TCP connection,
// probing every 2 ms.
func waitAccepting(ctx context.Context, addr string) (time.Time, error) {
	for {
		d := net.Dialer{Timeout: 100 * time.Millisecond}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			at := time.Now()
			_ = conn.Close()
			return at, nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return time.Time{}, errors.New("the broker did not accept connections in time")
		}
	}
}

// baselinePublish is what any client needs after a restart: a plain
// amqp091-go dial, a confirm-mode channel and one persistent publish to
// queue, retried every 20 ms (the library's knock interval) until the
// broker confirms it. It returns the moment of that confirm.
func baselinePublish(ctx context.Context, rawURL, queue string) (time.Time, error) {
	for {
		if at, err := baselineOnce(ctx, rawURL, queue); err == nil {
			return at, nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return time.Time{}, errors.New("the plain client's publish was not confirmed in time")
		}
	}
}

func baselineOnce(ctx context.Context, rawURL, queue string) (time.Time, error) {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return time.Time{}, err
	}
	if err := ch.Confirm(false); err != nil {
		return time.Time{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(pctx, "", queue, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, MessageId: "baseline", ContentType: "application/json", Body: []byte(`{"seq":-1}`),
	})
	if err != nil {
		return time.Time{}, err
	}
	ok, err := dc.WaitContext(pctx)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		return time.Time{}, errors.New("nacked")
	}
	return time.Now(), nil
}

// restoreBroker starts the broker's app again when a failed step may have
// left it stopped (nothing accepts on its port), so a failed drill does not
// leave the broker down.
func restoreBroker(env Env, addr string) {
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		_ = c.Close()
		return
	}
	_, _ = env.ctl(context.Background(), "start_app")
}

// restartTally is what the publishers and the consumer saw.
type restartTally struct {
	mu                       sync.Mutex
	confirmed                map[string]time.Time
	received                 map[string]time.Time
	paused, maybeLost, other int
	lastOther                error
}

func (t *restartTally) firstConfirmAfter(at time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return firstAfter(t.confirmed, at)
}

func (t *restartTally) firstReceiveAfter(at time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return firstAfter(t.received, at)
}

func firstAfter(m map[string]time.Time, at time.Time) (time.Time, bool) {
	var first time.Time
	for _, v := range m {
		if v.After(at) && (first.IsZero() || v.Before(first)) {
			first = v
		}
	}
	return first, !first.IsZero()
}

// Restart runs the restart drill: for each queue type, publishers and a
// consumer run while the broker is stopped and started o.Cycles times
// (rabbitmqctl stop_app / start_app). It reports confirmed messages lost
// (must be 0), publish errors by kind, the gap from the broker accepting
// connections to the first confirmed publish and to the consumer's first
// delivery, and beside them the gap a plain amqp091-go client needs to
// dial and get one publish confirmed on the same broker.
func Restart(ctx context.Context, env Env, o RestartOptions) *Result {
	o.defaults()
	res := newResult("restart")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	addr, err := amqpAddr(env.URL)
	if err != nil {
		res.Failf("%v", err)
		return res
	}
	for _, typ := range o.QueueTypes {
		if err := restartOne(ctx, env, o, typ, addr, res); err != nil {
			res.Failf("%s: %v", typ, err)
			return res
		}
	}
	return res
}

func restartOne(ctx context.Context, env Env, o RestartOptions, typ acemq.QueueType, addr string, res *Result) (err error) {
	events := make(chan acemq.Event, 256)
	c, err := env.connect(ctx, acemq.Config{OnEvent: func(e acemq.Event) {
		select {
		case events <- e:
		default:
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	q := unique("drill.restart." + string(typ))
	opt := acemq.QueueOptions{Type: acemq.Quorum}
	if typ == acemq.Classic {
		opt = acemq.QueueOptions{Type: acemq.Classic}
	}
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, opt)); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()
	tally := &restartTally{confirmed: map[string]time.Time{}, received: map[string]time.Time{}}
	k, err := acemq.Consume(ctx, c, q, func(ctx context.Context, m *acemq.Message[crashMsg]) acemq.Decision {
		tally.mu.Lock()
		tally.received[m.Envelope.ID] = time.Now()
		tally.mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 4})
	if err != nil {
		return err
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	pub := acemq.NewPublisher[crashMsg](c, "", q, acemq.PublisherConfig{})
	for w := 0; w < o.Publishers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; pubCtx.Err() == nil; seq++ {
				sctx, cancel := context.WithTimeout(pubCtx, 5*time.Second)
				sent, err := pub.Send(sctx, crashMsg{Seq: seq})
				cancel()
				tally.mu.Lock()
				var pe *acemq.PublishError
				switch {
				case err == nil:
					tally.confirmed[sent.Envelope.ID] = time.Now()
				case pubCtx.Err() != nil:
				case acemq.IsPaused(err):
					tally.paused++
				case errors.As(err, &pe) && pe.Sent:
					tally.maybeLost++
				default:
					tally.other++
					tally.lastOther = err
				}
				tally.mu.Unlock()
				if err != nil {
					_ = sleepCtx(pubCtx, 5*time.Millisecond) // pace refusals; a person's loop would too
				} else {
					_ = sleepCtx(pubCtx, 2*time.Millisecond) // a steady rate, not a flood
				}
			}
		}()
	}
	stopped := false
	defer func() {
		if !stopped {
			stopPub()
			wg.Wait()
			_ = k.Close(context.Background())
		}
	}()

	var gaps, consumerGaps, baseGaps []time.Duration
	for cycle := 1; cycle <= o.Cycles; cycle++ {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
		if _, err := env.ctl(ctx, "stop_app"); err != nil {
			restoreBroker(env, addr)
			return err
		}
		if err := waitEvent(ctx, events, acemq.EventLost, 30*time.Second); err != nil {
			restoreBroker(env, addr)
			return err
		}
		_ = sleepCtx(ctx, o.Down)
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		accepted := make(chan time.Time, 1)
		go func() {
			at, err := waitAccepting(cctx, addr)
			if err == nil {
				accepted <- at
			}
			close(accepted)
		}()
		baseline := make(chan time.Time, 1)
		if _, err := env.ctl(ctx, "start_app"); err != nil {
			cancel()
			restoreBroker(env, addr)
			return err
		}
		acceptAt, ok := <-accepted
		if !ok {
			cancel()
			return errors.New("the broker did not accept connections within 90s of start_app")
		}
		go func() {
			at, err := baselinePublish(cctx, env.URL, q)
			if err == nil {
				baseline <- at
			}
			close(baseline)
		}()
		var pubAt, recvAt time.Time
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && (pubAt.IsZero() || recvAt.IsZero()); {
			if pubAt.IsZero() {
				pubAt, _ = tally.firstConfirmAfter(acceptAt)
			}
			if recvAt.IsZero() {
				recvAt, _ = tally.firstReceiveAfter(acceptAt)
			}
			_ = sleepCtx(ctx, time.Millisecond) // the tally has no change event
		}
		baseAt, baseOK := <-baseline
		cancel()
		if pubAt.IsZero() {
			return fmt.Errorf("cycle %d: no publish was confirmed within 60s of the broker accepting connections", cycle)
		}
		if recvAt.IsZero() {
			res.Failf("%s cycle %d: the consumer did not resume within 60s", typ, cycle)
		}
		gaps = append(gaps, pubAt.Sub(acceptAt))
		if !recvAt.IsZero() {
			consumerGaps = append(consumerGaps, recvAt.Sub(acceptAt))
		}
		if baseOK {
			baseGaps = append(baseGaps, baseAt.Sub(acceptAt))
		}
		env.logf("restart %s: cycle %d of %d: accepting → first confirmed publish %s, → first delivery %s, plain client %s",
			typ, cycle, o.Cycles, ms(pubAt.Sub(acceptAt)), ms(recvAt.Sub(acceptAt)), ms(baseAt.Sub(acceptAt)))
	}
	_ = sleepCtx(ctx, 500*time.Millisecond) // publish a little after the last recovery
	stopPub()
	wg.Wait()
	// Let the consumer take what was confirmed, then count what is left.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !tally.allReceived() {
		_ = sleepCtx(ctx, 10*time.Millisecond)
	}
	closeErr := k.Close(context.Background())
	stopped = true
	left, err := drainIDs(ctx, c, q)
	if err != nil {
		return err
	}
	tally.mu.Lock()
	defer tally.mu.Unlock()
	lost := 0
	for id := range tally.confirmed {
		if _, ok := tally.received[id]; !ok && left[id] == 0 {
			lost++
		}
	}
	p := string(typ) + "."
	res.Set(p+"cycles", o.Cycles)
	res.Set(p+"confirmed", len(tally.confirmed))
	res.Set(p+"lost", lost)
	res.Set(p+"paused", tally.paused)
	res.Set(p+"may-have-been-lost", tally.maybeLost)
	res.Set(p+"other", tally.other)
	res.Set(p+"publish-gap", spread(gaps))
	res.Set(p+"consumer-gap", spread(consumerGaps))
	res.Set(p+"plain-client-gap", spread(baseGaps))
	if lost > 0 {
		res.Failf("%s: %d confirmed messages lost", typ, lost)
	}
	if tally.other > 0 {
		res.Failf("%s: %d publish errors of no known kind, the last: %v", typ, tally.other, tally.lastOther)
	}
	if closeErr != nil {
		res.Failf("%s: closing the consumer: %v", typ, closeErr)
	}
	return nil
}

func (t *restartTally) allReceived() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.confirmed {
		if _, ok := t.received[id]; !ok {
			return false
		}
	}
	return true
}

// spread renders durations as median/max in milliseconds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s/%s", ms(s[len(s)/2]), ms(s[len(s)-1]))
}

// waitEvent waits for an event of kind, at most limit.
func waitEvent(ctx context.Context, events <-chan acemq.Event, kind acemq.EventKind, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return nil
			}
		case <-t.C:
			return fmt.Errorf("no %q event within %s", kind, limit)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
