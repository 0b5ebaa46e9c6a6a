package stream

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/acemq-go/acemq"
)

// Lag is how far a reader is behind its stream's end.
type Lag struct {
	// Handled is the newest offset the reader handled; -1 before the first.
	Handled int64
	// End is the newest offset known to be in the stream: the newest the
	// reader received, or the newest a probe found; -1 when none is known.
	End int64
	// Behind is End − Handled: messages in the stream the reader has not
	// handled yet (End + 1 before the first). On RabbitMQ a probe sees the
	// newest chunk's end, so Behind is exact at the moment of the probe.
	Behind int64
	// Age is how long ago the newest handled message was first published
	// (its envelope's FirstSeen), measured now; 0 when unknown.
	Age time.Duration
	// Probed is when End was last refreshed by a probe; zero when never.
	Probed time.Time
}

// LagProbe sets how often the reader probes its stream's end for Lag and
// the lag metrics (every 10 s when not given; 0 never, so End is only
// the newest offset received). Each probe is two short-lived consumers on
// a channel of their own (see Probe).
func LagProbe(every time.Duration) Option { return func(c *config) { c.lagEvery = every } }

// lagState is what Lag reads; the reader's mutex guards it.
type lagState struct {
	end       int64
	probed    time.Time
	firstSeen time.Time // of the newest handled message
	probeErr  error
}

// Lag returns how far the reader is behind, from what it knows now (no
// I/O). Safe for concurrent use.
func (r *Reader) Lag() Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := Lag{Handled: r.handled, End: max(r.lag.end, r.handled), Probed: r.lag.probed}
	l.Behind = l.End - l.Handled
	if !r.lag.firstSeen.IsZero() {
		l.Age = max(time.Since(r.lag.firstSeen), 0)
	}
	return l
}

// ProbeLag probes the stream's end now (see Probe) and returns the
// refreshed Lag. It fails when the probe does; Lag keeps the old end then.
func (r *Reader) ProbeLag(ctx context.Context) (Lag, error) {
	_, last, err := probe(ctx, r.conn, r.stream, "last", true)
	r.mu.Lock()
	r.lag.probeErr = err
	if err == nil {
		r.lag.probed = time.Now()
		r.lag.end = max(r.lag.end, last)
	}
	r.mu.Unlock()
	return r.Lag(), err
}

// seen notes a delivery's offset as a known end.
func (r *Reader) seen(off int64) {
	r.mu.Lock()
	r.lag.end = max(r.lag.end, off)
	r.mu.Unlock()
}

// prober refreshes the reader's end every interval until closed.
type prober struct {
	cancel context.CancelFunc // also ends a probe in flight
	done   chan struct{}
}

func (r *Reader) startProber(every time.Duration) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				_, _ = r.ProbeLag(pctx)
				pcancel()
			}
		}
	}()
	return p
}

// close stops the prober and waits for it, at most until ctx ends.
func (p *prober) close(ctx context.Context) {
	p.cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
}

// lagMetrics registers the reader's gauges on the Conn's meter provider:
// acemq.stream.lag ({message}, Lag.Behind) and acemq.stream.lag.age (s,
// Lag.Age), tagged queue (the stream), reader and transport. The returned
// function unregisters them.
func (r *Reader) lagMetrics(c *acemq.Conn) func() {
	m := c.Config().MeterProvider.Meter(acemq.InstrumentationScope)
	// The API returns a working no-op instrument alongside any error, so
	// an instrument that cannot be made never stops a reader.
	behind, _ := m.Int64ObservableGauge("acemq.stream.lag", metric.WithUnit("{message}"),
		metric.WithDescription("Messages in the stream a reader has not handled yet (end offset − handled offset)."))
	age, _ := m.Float64ObservableGauge("acemq.stream.lag.age", metric.WithUnit("s"),
		metric.WithDescription("How long ago the newest message a stream reader handled was first published."))
	attrs := metric.WithAttributeSet(attribute.NewSet(
		attribute.String("queue", r.stream), attribute.String("reader", r.name), attribute.String("transport", c.Health(context.Background()).Transport)))
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l := r.Lag()
		o.ObserveInt64(behind, l.Behind, attrs)
		o.ObserveFloat64(age, l.Age.Seconds(), attrs)
		return nil
	}, behind, age)
	if err != nil || reg == nil {
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { _ = reg.Unregister() }) }
}

// Health reports UP while the reader reads, and DEGRADED once the Stop
// policy halted it or while it is held at a message it could not set
// aside (Held); Detail says where, why and what to do. It answers from
// local state, ignoring ctx. Safe for concurrent use.
func (r *Reader) Health(context.Context) acemq.HealthReport {
	rep := acemq.HealthReport{Status: acemq.StatusUp, CheckedAt: time.Now()}
	if err := cmp.Or(r.Err(), r.Held()); err != nil {
		rep.Status = acemq.StatusDegraded
		rep.Detail = err.Error()
	}
	return rep
}

// Check is the Check named stream:{stream}/{reader} reporting Health, for
// acemq.CheckAll and the actuator.
func (r *Reader) Check() acemq.Check {
	return acemq.CheckFunc(fmt.Sprintf("stream:%s/%s", r.stream, r.name), r.Health)
}
