package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/outbox/internal/alarmtest"
	"github.com/acemq-go/acemq/outbox/internal/dbtest"
	"github.com/acemq-go/acemq/transport/memory"
)

// observedRelay is a relay whose spans and metrics go to in-memory readers.
type observedRelay struct {
	*Relay
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func observeRelay(t *testing.T, c *acemq.Conn, s *Store, opts ...RelayOption) observedRelay {
	t.Helper()
	o := observedRelay{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	o.Relay = newRelay(t, c, s, append([]RelayOption{WithTracerProvider(tp), WithMeterProvider(mp)}, opts...)...)
	return o
}

// span returns the one ended span called name.
func (o observedRelay) span(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	var names []string
	for _, s := range o.spans.Ended() {
		names = append(names, s.Name())
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; ended: %q", len(found), name, names)
	}
	return found[0]
}

// metrics returns acemq.outbox.total by "exchange routing.key outcome" and
// acemq.outbox.lag's count and sum by "exchange routing.key".
func (o observedRelay) metrics(t *testing.T) (total map[string]int64, lagCount map[string]uint64, lagSum map[string]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	total, lagCount, lagSum = map[string]int64{}, map[string]uint64{}, map[string]float64{}
	tag := func(s attribute.Set, k string) string { v, _ := s.Value(attribute.Key(k)); return v.AsString() }
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != acemq.InstrumentationScope {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if m.Name == "acemq.outbox.total" {
						total[fmt.Sprintf("%q %s %s", tag(p.Attributes, "exchange"), tag(p.Attributes, "routing.key"), tag(p.Attributes, "outcome"))] += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if m.Name == "acemq.outbox.lag" {
						k := fmt.Sprintf("%q %s", tag(p.Attributes, "exchange"), tag(p.Attributes, "routing.key"))
						lagCount[k] += p.Count
						lagSum[k] += p.Sum
					}
				}
			}
		}
	}
	return total, lagCount, lagSum
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func assertSpanAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	if got := spanAttrs(s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s attributes\n got  %v\n want %v", s.Name(), got, want)
	}
}

func TestRelayPublishSpanCarriesTheOutboxLagAndContinuesTheStoredTrace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		// created_at is whole milliseconds: start on one, so lags are exact.
		clock := &fakeClock{t: time.UnixMilli(time.Now().UnixMilli())}
		s.now, s.leaseNow = clock.now, clock.now
		c, _ := memConn(t, "orders")
		if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic}).Exchange("shop", acemq.Direct, acemq.ExchangeOptions{}).Bind("orders", "shop", "orders")); err != nil {
			t.Fatal(err)
		}
		// The first record carries the trace of the work that wrote it.
		const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		traced, err := s.Add(ctx, tx, c, "", "orders", order{"a", 1}, WithType("order.placed"), WithCorrelationID("corr-1"),
			WithHeader("traceparent", "00-"+traceID+"-"+spanID+"-01"))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		clock.advance(1500 * time.Millisecond)
		// The second goes through a named exchange, with no stored trace.
		plain := add(t, s, c, "shop", "orders", order{"b", 2})[0]
		clock.advance(250 * time.Millisecond)

		r := observeRelay(t, c, s)
		if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Published != 2 {
			t.Fatalf("sweep %+v", sw)
		}
		got := drain(t, c, "orders")
		if len(got) != 2 || got[0].Headers["traceparent"] != "00-"+traceID+"-"+spanID+"-01" {
			t.Fatalf("published %d messages; the first carries traceparent %v, want the stored one unchanged", len(got), got[0].Headers["traceparent"])
		}

		first := r.span(t, "orders publish")
		if first.SpanKind() != trace.SpanKindProducer {
			t.Errorf("kind %v, want producer", first.SpanKind())
		}
		assertSpanAttrs(t, first, map[string]string{
			"messaging.system":                           "rabbitmq",
			"messaging.destination.name":                 "orders",
			"messaging.operation":                        "publish",
			"messaging.message.id":                       traced.ID,
			"messaging.message.conversation_id":          "corr-1",
			"messaging.rabbitmq.destination.routing_key": "orders",
			"messaging.acemq.message_type":               "order.placed",
			"messaging.acemq.outcome":                    "published",
			"messaging.acemq.outbox_lag_ms":              "1750",
		})
		if p := first.Parent(); p.TraceID().String() != traceID || p.SpanID().String() != spanID || !p.IsRemote() {
			t.Errorf("parent %s/%s (remote %v), want the stored %s/%s", p.TraceID(), p.SpanID(), p.IsRemote(), traceID, spanID)
		}
		second := r.span(t, "shop publish")
		assertSpanAttrs(t, second, map[string]string{
			"messaging.system":                           "rabbitmq",
			"messaging.destination.name":                 "shop",
			"messaging.operation":                        "publish",
			"messaging.message.id":                       plain,
			"messaging.message.conversation_id":          plain,
			"messaging.rabbitmq.destination.routing_key": "orders",
			"messaging.acemq.message_type":               "orders",
			"messaging.acemq.outcome":                    "published",
			"messaging.acemq.outbox_lag_ms":              "250",
		})
		if second.Parent().IsValid() {
			t.Errorf("a record with no stored trace has parent %v, want a root span", second.Parent())
		}
		for _, sp := range []sdktrace.ReadOnlySpan{first, second} {
			if sp.Status().Code != codes.Unset || len(sp.Events()) != 0 {
				t.Errorf("%s: status %v, events %v; want unset and none", sp.Name(), sp.Status(), sp.Events())
			}
		}

		total, lagCount, lagSum := r.metrics(t)
		if want := map[string]int64{`"" orders published`: 1, `"shop" orders published`: 1}; fmt.Sprint(total) != fmt.Sprint(want) {
			t.Errorf("acemq.outbox.total %v, want %v", total, want)
		}
		if want := map[string]uint64{`"" orders`: 1, `"shop" orders`: 1}; fmt.Sprint(lagCount) != fmt.Sprint(want) {
			t.Errorf("acemq.outbox.lag counts %v, want %v", lagCount, want)
		}
		if lagSum[`"" orders`] != 1.75 || lagSum[`"shop" orders`] != 0.25 {
			t.Errorf("acemq.outbox.lag sums %v, want 1.75 s and 0.25 s", lagSum)
		}
	})
}

func TestRelayFailedPublishSpanIsAnErrorWithThePublishFailedEvent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t)
		id := add(t, s, c, "", "no-such-queue", order{"poison", 0})[0]
		r := observeRelay(t, c, s)
		sw := r.SweepOnce(ctx)
		if sw.Failed != 0 || !acemq.IsUnroutable(sw.Err) {
			t.Fatalf("sweep %+v", sw)
		}
		p, err := s.Pending(ctx, 0)
		if err != nil || len(p) != 1 || p[0].LastError == "" || p[0].Attempts != 0 {
			t.Fatalf("pending %+v (%v)", p, err)
		}

		sp := r.span(t, "no-such-queue publish")
		if sp.SpanKind() != trace.SpanKindProducer {
			t.Errorf("kind %v, want producer", sp.SpanKind())
		}
		assertSpanAttrs(t, sp, map[string]string{
			"messaging.system":                           "rabbitmq",
			"messaging.destination.name":                 "no-such-queue",
			"messaging.operation":                        "publish",
			"messaging.message.id":                       id,
			"messaging.message.conversation_id":          id,
			"messaging.rabbitmq.destination.routing_key": "no-such-queue",
			"messaging.acemq.message_type":               "no-such-queue",
			"messaging.acemq.outcome":                    "failed", // the counter's word for an unroutable record
			"messaging.acemq.reason":                     "NO_ROUTE",
		})
		if sp.Status().Code != codes.Error || sp.Status().Description != sw.Err.Error() {
			t.Errorf("status %v, want ERROR %q", sp.Status(), sw.Err.Error())
		}
		ev := sp.Events()
		if len(ev) != 1 || ev[0].Name != "outbox.publish_failed" ||
			fmt.Sprint(ev[0].Attributes) != fmt.Sprint([]attribute.KeyValue{attribute.String("messaging.acemq.reason", p[0].LastError)}) {
			t.Errorf("events %+v, want one outbox.publish_failed with the stored last error %q as the reason", ev, p[0].LastError)
		}

		total, lagCount, _ := r.metrics(t)
		if want := map[string]int64{`"" no-such-queue failed`: 1}; fmt.Sprint(total) != fmt.Sprint(want) {
			t.Errorf("acemq.outbox.total %v, want %v", total, want)
		}
		if len(lagCount) != 0 {
			t.Errorf("acemq.outbox.lag %v, want nothing for a failed publish", lagCount)
		}
	})
}

func TestRelayRefusedPublishSpanIsAnErrorWithoutTheEventOrACount(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backends[0])
	c, name := memConn(t, "orders")
	broker := memory.Lookup(name)
	id := add(t, s, c, "", "orders", order{"a", 1})[0]
	r := observeRelay(t, c, s, WithPublishTimeout(200*time.Millisecond))

	held := alarmtest.BlockAndWait(t, c, broker, "low on memory")
	sw := r.SweepOnce(ctx)
	if !acemq.IsPaused(sw.Err) {
		t.Fatalf("sweep %+v, want it stopped by the paused refusal", sw)
	}
	broker.Unblock()
	alarmtest.HeldConfirms(t, held)

	sp := r.span(t, "orders publish")
	got := spanAttrs(sp)
	if got["messaging.acemq.outcome"] != "refused" || got["messaging.message.id"] != id {
		t.Errorf("attributes %v, want outcome refused for %s", got, id)
	}
	for _, k := range []string{"messaging.acemq.outbox_lag_ms", "messaging.acemq.reason"} {
		if v, ok := got[k]; ok {
			t.Errorf("a refused publish carries %s = %s", k, v)
		}
	}
	if sp.Status().Code != codes.Error || !strings.Contains(sp.Status().Description, "low on memory") || len(sp.Events()) != 0 {
		t.Errorf("status %v, events %v; want ERROR naming the block and no event", sp.Status(), sp.Events())
	}
	if total, lagCount, _ := r.metrics(t); len(total) != 0 || len(lagCount) != 0 {
		t.Errorf("acemq.outbox.total %v, lag %v; a refusal is not counted", total, lagCount)
	}
}

// TestRelayUsesTheConnsProvidersByDefault: a relay given no provider of
// its own makes its spans and metrics with the Conn's, so one option on
// Connect instruments the outbox too.
func TestRelayUsesTheConnsProvidersByDefault(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	c, err := acemq.Connect(ctx, "memory://outbox-providers-"+dbtest.RandHex(6), acemq.Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, backends[0])
	add(t, s, c, "", "orders", order{"a", 1})
	r := newRelay(t, c, s)
	if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Published != 1 {
		t.Fatalf("sweep %+v", sw)
	}
	var found bool
	for _, sp := range spans.Ended() {
		found = found || (sp.Name() == "orders publish" && spanAttrs(sp)["messaging.acemq.outbox_lag_ms"] != "")
	}
	if !found {
		t.Fatal("no relay publish span (with outbox_lag_ms) reached the Conn's tracer provider")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found = false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == "acemq.outbox.total"
		}
	}
	if !found {
		t.Fatal("acemq.outbox.total did not reach the Conn's meter provider")
	}
}

// TestAddStoresTheCallersTraceAndTheRelayContinuesIt: a record written
// under a span carries that span's trace context, so the relay's publish
// span is its child and the consumer receives the caller's trace. A
// traceparent set with WithHeader wins.
func TestAddStoresTheCallersTraceAndTheRelayContinuesIt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, backends[0])
	c, _ := memConn(t, "orders")
	caller := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = caller.Shutdown(context.Background()) })
	work, span := caller.Tracer("app").Start(ctx, "place order")
	defer span.End()
	want := span.SpanContext()

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	traced, err := s.Add(work, tx, c, "", "orders", order{"a", 1})
	if err != nil {
		t.Fatal(err)
	}
	const given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	kept, err := s.Add(work, tx, c, "", "orders", order{"b", 2}, WithHeader("traceparent", given))
	if err != nil {
		t.Fatal(err)
	}
	untraced, err := s.Add(ctx, tx, c, "", "orders", order{"c", 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	r := observeRelay(t, c, s)
	if sw := r.SweepOnce(ctx); sw.Err != nil || sw.Published != 3 {
		t.Fatalf("sweep %+v", sw)
	}
	got := map[string]any{}
	for _, m := range drain(t, c, "orders") {
		got[m.Envelope.ID] = m.Headers["traceparent"]
	}
	wantHeader := "00-" + want.TraceID().String() + "-" + want.SpanID().String() + "-01"
	if got[traced.ID] != wantHeader {
		t.Errorf("the record added under a span arrived with traceparent %v, want the caller's %s", got[traced.ID], wantHeader)
	}
	if got[kept.ID] != given {
		t.Errorf("a traceparent given with WithHeader arrived as %v, want it kept: %s", got[kept.ID], given)
	}
	if v, ok := got[untraced.ID]; ok && v != nil {
		t.Errorf("a record added without a span arrived with traceparent %v, want none", v)
	}
	var parent trace.SpanContext
	for _, sp := range r.spans.Ended() {
		if spanAttrs(sp)["messaging.message.id"] == traced.ID {
			parent = sp.Parent()
		}
	}
	if parent.TraceID() != want.TraceID() || parent.SpanID() != want.SpanID() {
		t.Errorf("the relay's publish span has parent %s/%s, want the caller's span %s/%s", parent.TraceID(), parent.SpanID(), want.TraceID(), want.SpanID())
	}
}
