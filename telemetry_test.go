package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/alarmtest"
	"github.com/acemq-go/acemq/internal/brokertest"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport/memory"
)

// observed is a Conn wired to in-memory OpenTelemetry readers.
type observed struct {
	conn    *acemq.Conn
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	settled chan acemq.Settlement
}

func observe(t *testing.T, url string, opts ...acemq.Config) *observed {
	t.Helper()
	o := &observed{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), settled: make(chan acemq.Settlement, 100)}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	cfg := brokertest.Overlay(acemq.Config{
		Logger:         slog.New(slog.DiscardHandler),
		MeterProvider:  mp,
		TracerProvider: tp,
		OnSettlement:   func(s acemq.Settlement) { o.settled <- s },
	}, opts...)
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.conn = c
	t.Cleanup(func() { _ = c.Close(ctx) })
	return o
}

// waitSettled returns the next n settlements.
func (o *observed) waitSettled(t *testing.T, n int) []acemq.Settlement {
	t.Helper()
	var got []acemq.Settlement
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case s := <-o.settled:
			got = append(got, s)
		case <-timeout:
			t.Fatalf("%d of %d settlements arrived: %+v", len(got), n, got)
		}
	}
	return got
}

func (o *observed) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != acemq.InstrumentationScope {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// count sums an int64 counter's points whose attributes include want.
func count(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]string) int64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, not an int64 sum", name, m.Data)
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Value
		}
	}
	return n
}

// histCount counts a float64 histogram's observations whose attributes include want.
func histCount(t *testing.T, rm metricdata.ResourceMetrics, name string, want map[string]string) uint64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	if !ok {
		return 0
	}
	var n uint64
	switch h := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range h.DataPoints {
			if matches(dp.Attributes, want) {
				n += dp.Count
			}
		}
	case metricdata.Histogram[int64]:
		for _, dp := range h.DataPoints {
			if matches(dp.Attributes, want) {
				n += dp.Count
			}
		}
	default:
		t.Fatalf("%s is %T, not a histogram", name, m.Data)
	}
	return n
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansNamed(o *observed, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range o.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

type order2 struct {
	ID string `json:"id"`
}

func TestSettlementCountersTagsAndSpanStatusAgree(t *testing.T) {
	cases := []struct {
		name     string
		policy   acemq.RetryPolicy
		raw      []byte // published raw instead of a payload: undecodable
		handler  func(attempt int) acemq.Decision
		outcomes []acemq.Outcome
		retried  int64
		dead     map[string]int64 // dead.lettered.total by outcome
		errorEnd bool             // the last process span is ERROR
		event    string           // an event on the last span
	}{
		{name: "accept", handler: func(int) acemq.Decision { return acemq.Accept() }, outcomes: []acemq.Outcome{"acked"}},
		{name: "retry then accept", handler: func(a int) acemq.Decision {
			if a == 1 {
				return acemq.Retry(errors.New("not yet"))
			}
			return acemq.Accept()
		}, outcomes: []acemq.Outcome{"retried", "acked"}, retried: 1},
		{name: "exhausted is dead_lettered", handler: func(int) acemq.Decision { return acemq.Retry(errors.New("boom")) },
			outcomes: []acemq.Outcome{"retried", "dead_lettered"}, retried: 1, dead: map[string]int64{"dead_lettered": 1}, errorEnd: true, event: "message.dead_lettered"},
		{name: "reject is rejected", handler: func(int) acemq.Decision { return acemq.Reject(errors.New("bad")) },
			outcomes: []acemq.Outcome{"rejected"}, dead: map[string]int64{"dead_lettered": 1}, event: "message.dead_lettered"},
		{name: "park is parked", handler: func(int) acemq.Decision { return acemq.Park(errors.New("later")) },
			outcomes: []acemq.Outcome{"parked"}, dead: map[string]int64{"parked": 1}, event: "message.dead_lettered"},
		{name: "undecodable is parked", raw: []byte("{not json"), handler: func(int) acemq.Decision { return acemq.Accept() },
			outcomes: []acemq.Outcome{"parked"}, dead: map[string]int64{"parked": 1}},
		{name: "in progress then accept", handler: func(a int) acemq.Decision {
			return acemq.Accept()
		}, outcomes: []acemq.Outcome{"in_progress", "acked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			o := observe(t, "memory://tel-"+strings.ReplaceAll(tc.name, " ", "-"))
			if err := o.conn.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
				t.Fatal(err)
			}
			policy := acemq.Fixed(2, time.Millisecond)
			calls := 0
			cons, err := acemq.Consume(ctx, o.conn, "orders", func(ctx context.Context, m *acemq.Message[order2]) acemq.Decision {
				calls++
				if tc.name == "in progress then accept" && calls == 1 {
					return acemq.InProgress(time.Millisecond)
				}
				return tc.handler(m.Envelope.Attempt)
			}, acemq.ConsumerConfig{Retry: policy})
			if err != nil {
				t.Fatal(err)
			}
			if tc.raw != nil {
				err = o.conn.PublishRaw(ctx, acemq.RawMessage{RoutingKey: "orders", ContentType: "application/json", MessageID: "raw-1",
					Headers: map[string]any{"x-acemq-type": "order"}, Body: tc.raw})
			} else {
				_, err = acemq.NewPublisher[order2](o.conn, "", "orders", acemq.PublisherConfig{}).SendWith(ctx, order2{ID: "1"}, acemq.SendOptions{Type: "order"})
			}
			if err != nil {
				t.Fatal(err)
			}
			got := o.waitSettled(t, len(tc.outcomes))
			for i, s := range got {
				if s.Outcome != tc.outcomes[i] {
					t.Fatalf("settlement %d is %s, want %s", i, s.Outcome, tc.outcomes[i])
				}
			}
			// Close drains: every delivery is released (acked) before it returns.
			if err := cons.Close(ctx); err != nil {
				t.Fatal(err)
			}
			rm := o.collect(t)
			per := map[string]int64{}
			for _, w := range tc.outcomes {
				per[string(w)]++
			}
			for w, n := range per {
				tags := map[string]string{"queue": "orders", "outcome": w, "transport": "memory", "message.type": "order"}
				if c := count(t, rm, "acemq.consume.total", tags); c != n {
					t.Errorf("acemq.consume.total%v = %d, want %d", tags, c, n)
				}
			}
			if c := count(t, rm, "acemq.messages.retried.total", map[string]string{"queue": "orders"}); c != tc.retried {
				t.Errorf("retried.total = %d, want %d", c, tc.retried)
			}
			for _, w := range []string{"dead_lettered", "parked"} {
				if c := count(t, rm, "acemq.messages.dead.lettered.total", map[string]string{"queue": "orders", "outcome": w}); c != tc.dead[w] {
					t.Errorf("dead.lettered.total{outcome=%s} = %d, want %d", w, c, tc.dead[w])
				}
			}
			wantDur := uint64(len(tc.outcomes))
			if tc.raw != nil {
				wantDur = 0 // no handler ran
			}
			if n := histCount(t, rm, "acemq.consume.duration", map[string]string{"queue": "orders"}); n != wantDur {
				t.Errorf("consume.duration observations = %d, want %d", n, wantDur)
			}
			if n := histCount(t, rm, "acemq.consume.attempts", map[string]string{"queue": "orders"}); n != uint64(len(tc.outcomes)) {
				t.Errorf("consume.attempts observations = %d, want %d", n, len(tc.outcomes))
			}
			if c := count(t, rm, "acemq.consume.in.flight", map[string]string{"queue": "orders", "transport": "memory"}); c != 0 {
				t.Errorf("in.flight = %d after settling, want 0", c)
			}
			spans := spansNamed(o, "orders process")
			if len(spans) != len(tc.outcomes) {
				t.Fatalf("%d process spans, want %d", len(spans), len(tc.outcomes))
			}
			var trace0 trace.TraceID
			for i, s := range spans {
				if s.SpanKind() != trace.SpanKindConsumer {
					t.Errorf("span kind %v", s.SpanKind())
				}
				if v, _ := spanAttr(s, "messaging.acemq.outcome"); v.AsString() != string(tc.outcomes[i]) {
					t.Errorf("span %d outcome %q, want %q", i, v.AsString(), tc.outcomes[i])
				}
				if v, _ := spanAttr(s, "messaging.system"); v.AsString() != "rabbitmq" {
					t.Errorf("messaging.system %q", v.AsString())
				}
				wantErr := tc.errorEnd && i == len(spans)-1
				if (s.Status().Code == codes.Error) != wantErr {
					t.Errorf("span %d (%s) status %v, want error=%v", i, tc.outcomes[i], s.Status(), wantErr)
				}
				if tc.outcomes[i] == "retried" && !hasEvent(s, "message.retried") {
					t.Errorf("retried span has no message.retried event")
				}
				if i == 0 {
					trace0 = s.SpanContext().TraceID()
				} else if s.SpanContext().TraceID() != trace0 {
					t.Errorf("attempt %d has trace %s, want %s (the trace is kept through hops)", i+1, s.SpanContext().TraceID(), trace0)
				}
			}
			if tc.event != "" && !hasEvent(spans[len(spans)-1], tc.event) {
				t.Errorf("last span has no %s event", tc.event)
			}
		})
	}
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	for _, e := range s.Events() {
		if e.Name == name {
			return true
		}
	}
	return false
}

func TestPublishOutcomesCountAndSetSpanStatus(t *testing.T) {
	ctx := context.Background()
	name := "tel-publish"
	o := observe(t, "memory://"+name, acemq.Config{ConfirmTimeout: time.Second})
	if err := o.conn.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[order2](o.conn, "", "orders", acemq.PublisherConfig{})
	if _, err := pub.SendWith(ctx, order2{ID: "1"}, acemq.SendOptions{Type: "order"}); err != nil {
		t.Fatal(err)
	}
	nowhere := acemq.NewPublisher[order2](o.conn, "", "nowhere", acemq.PublisherConfig{})
	if _, err := nowhere.SendWith(ctx, order2{ID: "2"}, acemq.SendOptions{Type: "order", Mandatory: true}); !acemq.IsUnroutable(err) {
		t.Fatalf("want unroutable, got %v", err)
	}
	held := alarmtest.BlockAndWait(t, o.conn, memory.Lookup(name), "low on memory")
	if _, err := pub.SendWith(ctx, order2{ID: "3"}, acemq.SendOptions{Type: "order"}); !acemq.IsPaused(err) {
		t.Fatalf("a publish while blocked: %v, want it refused as paused", err)
	}
	memory.Lookup(name).Unblock()
	if err := recv(t, held); err != nil {
		t.Fatalf("the publish held during the alarm, after unblock: %v", err)
	}

	rm := o.collect(t)
	for _, c := range []struct {
		key, outcome, span string
		err                bool
	}{
		{"orders", "confirmed", "orders publish", false},
		{"nowhere", "unroutable", "nowhere publish", true},
		{"orders", "refused", "orders publish", true},
	} {
		tags := map[string]string{"exchange": "", "routing.key": c.key, "message.type": "order", "transport": "memory", "outcome": c.outcome}
		if n := count(t, rm, "acemq.publish.total", tags); n != 1 {
			t.Errorf("publish.total%v = %d, want 1", tags, n)
		}
		if n := histCount(t, rm, "acemq.publish.duration", tags); n != 1 {
			t.Errorf("publish.duration%v = %d, want 1", tags, n)
		}
		found := false
		for _, s := range spansNamed(o, c.span) {
			if v, _ := spanAttr(s, "messaging.acemq.outcome"); v.AsString() != c.outcome {
				continue
			}
			found = true
			if s.SpanKind() != trace.SpanKindProducer {
				t.Errorf("%s: kind %v", c.outcome, s.SpanKind())
			}
			if (s.Status().Code == codes.Error) != c.err {
				t.Errorf("%s: status %v, want error=%v", c.outcome, s.Status(), c.err)
			}
			if rk, _ := spanAttr(s, "messaging.rabbitmq.destination.routing_key"); rk.AsString() != c.key {
				t.Errorf("%s: routing key %q", c.outcome, rk.AsString())
			}
			if c.outcome == "unroutable" {
				if r, ok := spanAttr(s, "messaging.acemq.reason"); !ok || r.AsString() == "" {
					t.Errorf("unroutable span has no reason")
				}
			}
		}
		if !found {
			t.Errorf("no %q span with outcome %s", c.span, c.outcome)
		}
	}
}

// assertChild checks the consumer span is the publish span's child.
func assertChild(t *testing.T, o *observed, publish, process string) {
	t.Helper()
	pubs, procs := spansNamed(o, publish), spansNamed(o, process)
	if len(pubs) != 1 || len(procs) != 1 {
		t.Fatalf("%d publish and %d process spans, want 1 and 1", len(pubs), len(procs))
	}
	p, c := pubs[0], procs[0]
	if c.SpanContext().TraceID() != p.SpanContext().TraceID() {
		t.Errorf("trace ids differ: publish %s, process %s", p.SpanContext().TraceID(), c.SpanContext().TraceID())
	}
	if c.Parent().SpanID() != p.SpanContext().SpanID() || !c.Parent().IsRemote() {
		t.Errorf("process parent %s (remote %v), want the publish span %s", c.Parent().SpanID(), c.Parent().IsRemote(), p.SpanContext().SpanID())
	}
}

func roundTrip(t *testing.T, o *observed, queue string) {
	t.Helper()
	ctx := context.Background()
	if err := o.conn.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	cons, err := acemq.Consume(ctx, o.conn, queue, func(ctx context.Context, m *acemq.Message[order2]) acemq.Decision {
		if _, ok := m.Envelope.Header("traceparent"); !ok {
			t.Errorf("the delivery has no traceparent header")
		}
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("the handler's context has no span")
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	if _, err := acemq.NewPublisher[order2](o.conn, "", queue, acemq.PublisherConfig{}).Send(ctx, order2{ID: "1"}); err != nil {
		t.Fatal(err)
	}
	o.waitSettled(t, 1)
}

func TestConsumerSpanIsChildOfPublishSpanOnMemory(t *testing.T) {
	o := observe(t, "memory://tel-child")
	roundTrip(t, o, "orders")
	assertChild(t, o, "orders publish", "orders process")
}

func TestConsumerSpanIsChildOfPublishSpanAcrossRabbitMQ(t *testing.T) {
	url := testenv.AMQPURL(t)
	q := testenv.Unique("tel-child")
	o := observe(t, url)
	roundTrip(t, o, q)
	assertChild(t, o, q+" publish", q+" process")
	for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
		_, _ = o.conn.DeleteQueue(context.Background(), n)
	}
}

func TestNoopProvidersByDefaultStillPublish(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://tel-noop", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	sent, err := acemq.NewPublisher[order2](c, "", "orders", acemq.PublisherConfig{}).Send(ctx, order2{ID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sent.Envelope.Header("traceparent"); ok {
		t.Errorf("a no-op tracer injected a traceparent")
	}
}

// TestSpanAttributesAreCompleteAndSetOnce pins what the one-call attribute
// recording (issue 16) must keep: every contract §5.4 attribute on the
// publish and process spans of a round trip, each key exactly once.
func TestSpanAttributesAreCompleteAndSetOnce(t *testing.T) {
	o := observe(t, "memory://tel-attrs")
	roundTrip(t, o, "orders")
	pub, proc := spansNamed(o, "orders publish"), spansNamed(o, "orders process")
	if len(pub) != 1 || len(proc) != 1 {
		t.Fatalf("%d publish and %d process spans, want 1 and 1", len(pub), len(proc))
	}
	id, _ := spanAttr(pub[0], "messaging.message.id")
	if id.AsString() == "" {
		t.Fatalf("the publish span has no message id")
	}
	check := func(s sdktrace.ReadOnlySpan, want map[string]string) {
		t.Helper()
		seen := map[string]int{}
		for _, kv := range s.Attributes() {
			seen[string(kv.Key)]++
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("%s: attribute %s recorded %d times", s.Name(), k, n)
			}
		}
		for k, v := range want {
			got, ok := spanAttr(s, k)
			if !ok || got.String() != v {
				t.Errorf("%s: %s = %q (present %v), want %q", s.Name(), k, got.String(), ok, v)
			}
		}
	}
	check(pub[0], map[string]string{
		"messaging.system": "rabbitmq", "messaging.destination.name": "orders", "messaging.operation": "publish",
		"messaging.rabbitmq.destination.routing_key": "orders", "messaging.acemq.outcome": "confirmed",
		"messaging.acemq.message_type": "orders",
	})
	check(proc[0], map[string]string{
		"messaging.system": "rabbitmq", "messaging.destination.name": "orders", "messaging.operation": "process",
		"messaging.message.id": id.AsString(), "messaging.acemq.attempt": "1", "messaging.acemq.outcome": "acked",
		"messaging.acemq.message_type": "orders",
	})
}
