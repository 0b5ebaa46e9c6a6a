package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/replay"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

type priced struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
	Tax   int    `json:"tax"`
}

// shipFixed is the operator's fix in the replay test.
var shipFixed atomic.Bool

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestNewRefusesAStepWhoseOutputIsNotTheNextInput(t *testing.T) {
	a := NewStep("validate", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) { return m.Payload, true, nil })
	b := NewStep("price", func(ctx context.Context, m *acemq.Message[priced]) (priced, bool, error) { return m.Payload, true, nil })
	_, err := New("orders", a, b)
	if err == nil {
		t.Fatal("a step producing order chained into one taking priced was accepted")
	}
	for _, want := range []string{`"validate"`, `"price"`, "pipeline.order", "pipeline.priced", "acemq: "} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not name %s", err, want)
		}
	}
}

func TestNewRefusesBadNamesAndEmptyAndRepeats(t *testing.T) {
	ok := NewStep("a", func(ctx context.Context, m *acemq.Message[int]) (int, bool, error) { return 0, true, nil })
	for name, steps := range map[string][]Step{
		"-bad":  {ok},
		"a b":   {ok},
		"good":  nil,
		"good.": {ok, ok},
	} {
		if _, err := New(name, steps...); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Fatalf("New(%q, %d steps): %v", name, len(steps), err)
		}
	}
	bad := NewStep("_x", func(ctx context.Context, m *acemq.Message[int]) (int, bool, error) { return 0, true, nil })
	if _, err := New("p", bad); err == nil || !strings.Contains(err.Error(), `"_x"`) {
		t.Fatalf("step name _x: %v", err)
	}
	if _, err := New("p.v-1", ok); err != nil {
		t.Fatalf("a valid name was refused: %v", err)
	}
}

func TestTopologyIsTheContractsLayout(t *testing.T) {
	p := threeSteps(t, "orders", nil)
	var got []string
	for _, d := range p.Topology().Declarations() {
		switch d.Kind {
		case acemq.DeclExchange:
			got = append(got, fmt.Sprintf("exchange %s %s", d.Exchange.Name, d.Exchange.Kind))
		case acemq.DeclQueue:
			got = append(got, fmt.Sprintf("queue %s %s", d.Queue.Name, d.QueueType))
		case acemq.DeclBinding:
			got = append(got, fmt.Sprintf("bind %s %s %s", d.Binding.Queue, d.Binding.Exchange, d.Binding.RoutingKey))
		}
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"exchange orders direct",
		"queue orders.validate quorum", "queue orders.price quorum", "queue orders.ship quorum",
		"bind orders.validate orders validate", "bind orders.price orders price", "bind orders.ship orders ship",
	} {
		if !strings.Contains(all, want) {
			t.Fatalf("topology lacks %q:\n%s", want, all)
		}
	}
}

// recorder keeps what the last step saw and the run events.
type recorder struct {
	mu     sync.Mutex
	last   []acemq.Envelope
	events []acemq.Event
}

func (r *recorder) shipped() []acemq.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acemq.Envelope(nil), r.last...)
}

func (r *recorder) finished() []acemq.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acemq.Event(nil), r.events...)
}

// threeSteps is validate (order→order, ends early on total 0, fails
// fatally on total < 0) → price (order→priced) → ship (priced→priced).
func threeSteps(t *testing.T, name string, r *recorder) *Pipeline {
	t.Helper()
	p, err := New(name,
		NewStep("validate", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) {
			if m.Payload.Total < 0 {
				return order{}, false, acemq.Fatal(errors.New("negative total"))
			}
			return m.Payload, m.Payload.Total != 0, nil
		}),
		NewStep("price", func(ctx context.Context, m *acemq.Message[order]) (priced, bool, error) {
			return priced{ID: m.Payload.ID, Total: m.Payload.Total, Tax: m.Payload.Total / 5}, true, nil
		}, Consumers(2)),
		NewStep("ship", func(ctx context.Context, m *acemq.Message[priced]) (priced, bool, error) {
			if m.Payload.ID == "broken" && !shipFixed.Load() {
				return priced{}, false, acemq.Fatal(errors.New("no address"))
			}
			r.mu.Lock()
			r.last = append(r.last, m.Envelope)
			r.mu.Unlock()
			return m.Payload, true, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func start(t *testing.T, url string, name string) (*acemq.Conn, *Pipeline, *recorder, *sdkmetric.ManualReader) {
	t.Helper()
	rec := &recorder{}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c := brokertest.Connect(t, url, acemq.Config{MeterProvider: mp, OnEvent: func(e acemq.Event) {
		if e.Kind == EventRunFinished {
			rec.mu.Lock()
			rec.events = append(rec.events, e)
			rec.mu.Unlock()
		}
	}})
	name = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	p := threeSteps(t, name, rec)
	ctx := context.Background()
	if err := c.Apply(ctx, p.Topology()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range p.Steps() {
			for _, q := range []string{p.Queue(s), p.Queue(s) + ".dlq"} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		}
	})
	run, err := p.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := run.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return c, p, rec, reader
}

func TestARunGoesThroughEveryStepWithTheRouteHeaders(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c, p, rec, reader := start(t, url, "run")
		sent, err := p.Send(context.Background(), c, order{ID: "o-1", Total: 100}, acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "the ship step runs", func() bool { return len(rec.shipped()) == 1 })
		env := rec.shipped()[0]
		if strings.Join(env.Route, ",") != strings.Join(p.Steps(), ",") || env.RoutePosition != 2 || !uuidRE.MatchString(env.RouteID) {
			t.Fatalf("ship saw route %v position %d id %q", env.Route, env.RoutePosition, env.RouteID)
		}
		if env.CorrelationID != sent.Envelope.CorrelationID || env.ID == sent.Envelope.ID || env.CausationID == "" || env.CausationID == sent.Envelope.ID {
			t.Fatalf("ship's envelope %+v does not descend from the sent %+v through price", env, sent)
		}
		brokertest.Eventually(t, "the run_finished event", func() bool { return len(rec.finished()) == 1 })
		f := rec.finished()[0].Fields
		if f["pipeline"] != p.Name() || f["step"] != "ship" || f["outcome"] != Completed || f["route_id"] != env.RouteID {
			t.Fatalf("event fields %v", f)
		}
		total, hist := runMetrics(t, reader)
		if total[Completed+"/ship"] != 1 || hist[Completed+"/ship"] != 1 {
			t.Fatalf("run metrics: total %v, duration counts %v", total, hist)
		}
	})
}

func TestAStepThatStopsEndsTheRunEarly(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c, p, rec, reader := start(t, url, "early")
		if _, err := p.Send(context.Background(), c, order{ID: "o-0", Total: 0}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "the run_finished event", func() bool { return len(rec.finished()) == 1 })
		if f := rec.finished()[0].Fields; f["step"] != "validate" || f["outcome"] != EndedEarly {
			t.Fatalf("event fields %v", f)
		}
		if total, _ := runMetrics(t, reader); total[EndedEarly+"/validate"] != 1 {
			t.Fatalf("run metrics: %v", total)
		}
		if n := brokertest.Depth(t, c, p.Queue("price")); n != 0 || len(rec.shipped()) != 0 {
			t.Fatalf("an ended run went on: price depth %d, shipped %d", n, len(rec.shipped()))
		}
	})
}

func TestSendRefusesAPayloadOfTheWrongType(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	p := threeSteps(t, "typed", &recorder{})
	if _, err := p.Send(context.Background(), c, "not an order", acemq.SendOptions{}); err == nil || !strings.Contains(err.Error(), "pipeline.order") {
		t.Fatalf("Send(string): %v", err)
	}
}

// A message in Java's shape (contract §3.8: route headers written by a
// Java step, at position 1) is handled by the Go step and goes on with
// the same route id.
func TestAJavaShapedMessageIsHandledAtItsPosition(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c, p, rec, _ := start(t, url, "java")
		route := strings.Join(p.Steps(), ",")
		err := c.PublishRaw(context.Background(), acemq.RawMessage{
			Exchange: p.Name(), RoutingKey: "price", ContentType: "application/json", MessageID: "java-1",
			Headers: map[string]any{
				"x-acemq-id": "java-1", "x-acemq-type": "order", "x-acemq-version": int32(1),
				"x-acemq-correlation": "corr-java", "x-acemq-attempt": int32(1), "x-acemq-first-seen": time.Now().UnixMilli(),
				"x-acemq-origin":         "orders-java@host",
				"x-acemq-route":          route,
				"x-acemq-route-position": int32(1),
				"x-acemq-route-id":       "7d5c8a0e-0d7e-4a43-9a0b-2f4f4f0e9b11",
			},
			Body: []byte(`{"id":"j","total":50}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "the ship step runs", func() bool { return len(rec.shipped()) == 1 })
		env := rec.shipped()[0]
		if env.RouteID != "7d5c8a0e-0d7e-4a43-9a0b-2f4f4f0e9b11" || env.RoutePosition != 2 || env.CausationID != "java-1" || env.CorrelationID != "corr-java" {
			t.Fatalf("hop from the Java-shaped message: %+v", env)
		}
	})
}

// What Send and a hop publish, field by field (contract §1.1 and §3.8),
// read off the wire with no consumer in between.
func TestWhatWePublishIsTheContractsShape(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		name := fmt.Sprintf("wire-%d", time.Now().UnixNano())
		p, err := New(name,
			NewStep("a", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) { return m.Payload, true, nil }),
			NewStep("b", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) { return m.Payload, true, nil }),
		)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Apply(ctx, p.Topology()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, q := range []string{p.Queue("a"), p.Queue("b"), p.Queue("a") + ".dlq"} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		})
		sent, err := p.Send(ctx, c, order{ID: "w", Total: 1}, acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first := brokertest.Pull(t, c, p.Queue("a"))
		h := first.Headers
		if h["x-acemq-route"] != "a,b" || fmt.Sprint(h["x-acemq-route-position"]) != "0" || !uuidRE.MatchString(fmt.Sprint(h["x-acemq-route-id"])) ||
			h["x-acemq-id"] != sent.Envelope.ID || first.RoutingKey != "a" || first.Exchange != name {
			t.Fatalf("Send wrote %v on %s/%s", h, first.Exchange, first.RoutingKey)
		}
		// Re-publish it as it came, and let step a hop it to b.
		if err := c.PublishRaw(ctx, acemq.RawMessage{Exchange: name, RoutingKey: "a", ContentType: first.ContentType, MessageID: sent.Envelope.ID, Headers: first.Headers, Body: first.Body}); err != nil {
			t.Fatal(err)
		}
		// Only step a consumes: the hop stays in b's queue to be read.
		pc := *p
		pc.metrics = meters(c)
		g, err := p.steps[0].start(ctx, c, &pc, 0)
		if err != nil {
			t.Fatal(err)
		}
		hop := brokertest.Pull(t, c, p.Queue("b"))
		if err := g.Close(ctx); err != nil {
			t.Fatal(err)
		}
		hh := hop.Headers
		if hh["x-acemq-route"] != "a,b" || fmt.Sprint(hh["x-acemq-route-position"]) != "1" || hh["x-acemq-route-id"] != h["x-acemq-route-id"] ||
			hh["x-acemq-causation"] != sent.Envelope.ID || hh["x-acemq-correlation"] != sent.Envelope.CorrelationID || hh["x-acemq-id"] == sent.Envelope.ID ||
			hop.RoutingKey != "b" || hop.Exchange != name || string(hop.Body) != string(first.Body) {
			t.Fatalf("the hop wrote %v on %s/%s body %s", hh, hop.Exchange, hop.RoutingKey, hop.Body)
		}
	})
}

// A message set aside at a step keeps its route headers, so replaying it
// resumes the run at that step.
func TestReplayResumesAtTheStep(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c, p, rec, _ := start(t, url, "replay")
		ctx := context.Background()
		if _, err := p.Send(ctx, c, order{ID: "broken", Total: 10}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		dlq := p.Queue("ship") + ".dlq"
		brokertest.Eventually(t, "ship sets the message aside", func() bool { return brokertest.Depth(t, c, dlq) == 1 })
		var seen *acemq.Pulled
		if _, err := replay.Browse(ctx, c, dlq, 1, func(m *acemq.Pulled) bool { seen = m; return false }, replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/")); err != nil {
			t.Fatal(err)
		}
		if seen == nil || seen.Envelope.RoutePosition != 2 || len(seen.Envelope.Route) != 3 || seen.Envelope.RouteID == "" {
			t.Fatalf("the set-aside copy lost its route: %+v", seen)
		}
		routeID := seen.Envelope.RouteID
		// The operator's fix: ship accepts it now.
		rec.mu.Lock()
		rec.last = nil
		rec.mu.Unlock()
		shipFixed.Store(true)
		defer shipFixed.Store(false)
		rep, err := replay.Queue(ctx, c, dlq)
		if err != nil || rep.Moved != 1 {
			t.Fatalf("replay: %v, %v", rep, err)
		}
		brokertest.Eventually(t, "the replayed message finishes the run at ship", func() bool {
			for _, e := range rec.finished() {
				if e.Fields["route_id"] == routeID && e.Fields["step"] == "ship" && e.Fields["outcome"] == Completed {
					return true
				}
			}
			return false
		})
		if got := rec.shipped(); len(got) != 1 || got[0].RouteID != routeID || got[0].RoutePosition != 2 {
			t.Fatalf("after replay ship saw %+v", got)
		}
		if n := brokertest.Depth(t, c, p.Queue("validate")) + brokertest.Depth(t, c, p.Queue("price")); n != 0 {
			t.Fatalf("replay restarted the run at an earlier step (%d messages)", n)
		}
	})
}

// runMetrics reads acemq.pipeline.run.total and the duration histogram's
// counts keyed outcome/step.
func runMetrics(t *testing.T, r *sdkmetric.ManualReader) (total, hist map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	total, hist = map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == "acemq.pipeline.run.total" {
					for _, dp := range d.DataPoints {
						o, _ := dp.Attributes.Value("outcome")
						s, _ := dp.Attributes.Value("step")
						total[o.AsString()+"/"+s.AsString()] += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name == "acemq.pipeline.run.duration" && m.Unit == "s" {
					for _, dp := range d.DataPoints {
						o, _ := dp.Attributes.Value("outcome")
						s, _ := dp.Attributes.Value("step")
						hist[o.AsString()+"/"+s.AsString()] += int64(dp.Count)
					}
				}
			}
		}
	}
	return total, hist
}

// A hop the broker cannot route (the next step's queue is gone) is not
// accepted: it goes through the step's retry policy, here straight to the
// step's .dlq with the reason.
func TestAnUnroutableHopGoesThroughTheStepsRetryPolicy(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		name := fmt.Sprintf("hopfail-%d", time.Now().UnixNano())
		p, err := New(name,
			NewStep("a", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) { return m.Payload, true, nil }, StepRetry(acemq.NoRetry())),
			NewStep("b", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) { return m.Payload, true, nil }),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, p.Topology()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, q := range []string{p.Queue("a"), p.Queue("a") + ".dlq", p.Queue("a") + ".parked", p.Queue("b")} {
				_, _ = c.DeleteQueue(context.Background(), q)
			}
		})
		if _, err := c.DeleteQueue(ctx, p.Queue("b")); err != nil {
			t.Fatal(err)
		}
		pc := *p
		pc.metrics = meters(c)
		g, err := p.steps[0].start(ctx, c, &pc, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		if _, err := p.Send(ctx, c, order{ID: "x", Total: 1}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		dlq := p.Queue("a") + ".dlq"
		brokertest.Eventually(t, "the step sets the message aside", func() bool { return brokertest.Depth(t, c, dlq) == 1 })
		var reason string
		if _, err := replay.Browse(ctx, c, dlq, 1, func(m *acemq.Pulled) bool { reason = m.Envelope.Error; return false }, replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/")); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(reason, `could not hand step "a"'s output to step "b"`) {
			t.Fatalf("set aside with %q", reason)
		}
	})
}
