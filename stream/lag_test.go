package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
)

// gauge returns the value of the named int64 gauge for reader, and
// whether it was there.
func gauge(t *testing.T, mr *sdkmetric.ManualReader, name, reader string) (int64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := mr.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok {
				t.Fatalf("%s is %T, want an int64 gauge", name, m.Data)
			}
			for _, p := range g.DataPoints {
				if v, _ := p.Attributes.Value("reader"); v.AsString() == reader {
					return p.Value, true
				}
			}
		}
	}
	return 0, false
}

// TestLagSaysHowFarBehindTheReaderIs: a reader held at the sixth of twenty
// messages is 15 behind once probed, with an age; the gauge says the same;
// let go, it catches up to 0. Closed, its gauge is gone.
func TestLagSaysHowFarBehindTheReaderIs(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		mr := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(mr))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		c := brokertest.Connect(t, url, acemq.Config{MeterProvider: mp})
		s := newStream(t, c)
		publish(t, c, s, 0, 20)
		gate := make(chan struct{})
		var l log
		r, err := Read(context.Background(), c, s, "laggard", func(ctx context.Context, m *Message[event]) acemq.Decision {
			if m.Payload.N == 5 {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			l.add(m)
			return acemq.Accept()
		}, From(First()), LagProbe(0), Prefetch(2))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(context.Background())
		brokertest.Eventually(t, "five handled", func() bool { return l.count() == 5 })
		offs, _ := l.snapshot()
		before := r.Lag()
		if before.Handled != offs[4] || before.End >= offs[4]+15 || !before.Probed.IsZero() {
			t.Fatalf("before a probe Lag() = %+v; want Handled %d and End only what was received (prefetch 2)", before, offs[4])
		}
		lag, err := r.ProbeLag(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if lag.Handled != offs[4] || lag.Behind != 15 || lag.End != offs[4]+15 || lag.Age <= 0 || lag.Probed.IsZero() {
			t.Fatalf("ProbeLag() = %+v; want handled %d, end %d, 15 behind, a positive age", lag, offs[4], offs[4]+15)
		}
		if v, ok := gauge(t, mr, "acemq.stream.lag", "laggard"); !ok || v != 15 {
			t.Fatalf("acemq.stream.lag = %d, %v; want 15", v, ok)
		}
		close(gate)
		brokertest.Eventually(t, "all handled", func() bool { return l.count() == 20 })
		if lag, err := r.ProbeLag(context.Background()); err != nil || lag.Behind != 0 {
			t.Fatalf("after catching up ProbeLag() = %+v, %v; want 0 behind", lag, err)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := gauge(t, mr, "acemq.stream.lag", "laggard"); ok {
			t.Fatal("the closed reader's gauge is still reported")
		}
	})
}

// TestLagProbeRunsOnItsOwn: with LagProbe set, Lag's end is refreshed
// without a call to ProbeLag.
func TestLagProbeRunsOnItsOwn(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	publish(t, c, s, 0, 10)
	gate := make(chan struct{})
	defer close(gate)
	r := read(t, c, s, "watched", func(ctx context.Context, m *Message[event]) acemq.Decision {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return acemq.Accept()
	}, From(First()), Prefetch(1), LagProbe(20*time.Millisecond))
	brokertest.Eventually(t, "a probe found the end", func() bool { l := r.Lag(); return !l.Probed.IsZero() && l.End == 9 })
	if l := r.Lag(); l.Behind != 10 || l.Handled != -1 {
		t.Fatalf("Lag() = %+v; want nothing handled and 10 behind", l)
	}
}

func TestProbeReportsTheBoundsAndRefusesAQueue(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		b, err := Probe(context.Background(), c, s)
		if err != nil || !b.Empty() || b.Messages() != 0 {
			t.Fatalf("Probe(empty) = %+v, %v; want empty", b, err)
		}
		publish(t, c, s, 0, 7)
		b, err = Probe(context.Background(), c, s)
		if err != nil || b.First != 0 || b.Last != 6 || b.Messages() != 7 {
			t.Fatalf("Probe = %+v, %v; want 0..6", b, err)
		}
		q := brokertest.Queue(t, c, "not-a-stream")
		brokertest.Publish(t, c, q, 1)
		if _, err := Probe(context.Background(), c, q); err == nil || !strings.Contains(err.Error(), "a stream") {
			t.Fatalf("Probe(classic queue) = %v, want it said not to be a stream", err)
		}
		brokertest.Eventually(t, "the classic queue's message is back", func() bool { return brokertest.Depth(t, c, q) == 1 })
		if _, err := Probe(context.Background(), c, "no-such-stream-"+s); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Fatalf("Probe(missing) = %v, want an acemq error", err)
		}
	})
}

// TestStoppedReaderMakesHealthDegraded: health is UP while the reader
// reads and DEGRADED, naming the offset, once the Stop policy halts it.
func TestStoppedReaderMakesHealthDegraded(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 3)
		var l log
		fail := make(chan struct{})
		r := read(t, c, s, "health", func(ctx context.Context, m *Message[event]) acemq.Decision {
			l.add(m)
			if m.Payload.N == 1 {
				<-fail
				return acemq.Retry(nil)
			}
			return acemq.Accept()
		}, From(First()), OnFailure(Stop))
		brokertest.Eventually(t, "the reader is at the second message", func() bool { return l.count() == 2 })
		check := r.Check()
		if rep := acemq.CheckAll(context.Background(), 0, check); rep.Status != acemq.StatusUp {
			t.Fatalf("health while reading = %s (%s), want UP", rep.Status, rep.Detail)
		}
		close(fail)
		brokertest.Eventually(t, "the reader stopped", func() bool { return r.Err() != nil })
		rep := acemq.CheckAll(context.Background(), 0, check)
		part := rep.Parts[check.Name()]
		offs, _ := l.snapshot()
		if rep.Status != acemq.StatusDegraded || part.Status != acemq.StatusDegraded || !strings.Contains(part.Detail, fmt.Sprintf("stopped at offset %d", offs[1])) {
			t.Fatalf("health after the stop = %s / %+v; want DEGRADED naming offset %d", rep.Status, part, offs[1])
		}
		if check.Name() != "stream:"+s+"/health" {
			t.Fatalf("check name %q", check.Name())
		}
	})
}

// A lag prober stuck in a probe (a channel close the broker never answers,
// seen on RabbitMQ 4.0 after a partition) does not hold Reader.Close past
// its context: close returns when ctx ends, after cancelling the probe.
func TestProberCloseReturnsAtItsContextsEndWhenTheProbeIsStuck(t *testing.T) {
	cancelled := make(chan struct{})
	p := &prober{cancel: func() { close(cancelled) }, done: make(chan struct{})} // done never closes: stuck
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	returned := make(chan struct{})
	go func() { p.close(ctx); close(returned) }()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("prober.close still waiting on a stuck probe 10 s after its context ended")
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("prober.close returned without cancelling the probe")
	}
}
