package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/wire"
	"github.com/acemq-go/acemq/transport"
)

// order is a JSON payload, as a Java or Python service would schedule.
type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// Our hop, field by field as contract §3.7 gives it: on acemq.schedule
// with the rung's name (seen here after the 1 s rung dead-lettered it
// into the control queue, no scheduler running), envelope type
// ScheduledMessage, application/octet-stream, the four headers with the
// due time in epoch ms, and the payload's bytes encoded once.
func TestOurHopIsTheContractsShape(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		if err := c.Apply(ctx, Topology()); err != nil {
			t.Fatal(err)
		}
		target := brokertest.Queue(t, c, "schedule.shape")
		due := time.Now().Add(1500 * time.Millisecond)
		payload := order{ID: "o-7", Total: 42}
		if err := At(ctx, c, "", target, payload, due); err != nil {
			t.Fatal(err)
		}
		var m *acemq.Pulled
		for m == nil { // the shared node's control queue may hold strays
			p := brokertest.Pull(t, c, DueQueue)
			if k, _ := p.Envelope.Header(HeaderRoutingKey); k == target {
				m = p
			}
		}
		want, _ := json.Marshal(payload)
		if string(m.Body) != string(want) {
			t.Errorf("body %q, want the payload encoded once: %q", m.Body, want)
		}
		if m.ContentType != "application/octet-stream" || m.Envelope.Type != MessageType || m.Envelope.ID == "" {
			t.Errorf("content type %q, type %q, id %q; want application/octet-stream, %s and an id", m.ContentType, m.Envelope.Type, m.Envelope.ID, MessageType)
		}
		for name, want := range map[string]any{HeaderExchange: "", HeaderRoutingKey: target, HeaderDueAt: due.UnixMilli(), HeaderContentType: "application/json"} {
			got, ok := m.Headers[name]
			if !ok {
				t.Errorf("the hop lacks %s", name)
				continue
			}
			if n, isInt := wire.Int(got); name == HeaderDueAt && (!isInt || n != want.(int64)) {
				t.Errorf("%s = %T %v, want the integer %d (epoch ms)", name, got, got, want)
			} else if name != HeaderDueAt && fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		// The rung dead-lettered it; the broker's x-death names the rung
		// and the exchange the hop was published to (memory:// writes no
		// x-death).
		if deaths, ok := m.Headers["x-death"].([]any); ok && len(deaths) > 0 {
			var d map[string]any
			switch x := deaths[0].(type) {
			case map[string]any:
				d = x
			case transport.Table:
				d = x
			}
			if d["queue"] != "acemq.schedule.1s" || d["exchange"] != Exchange || fmt.Sprint(d["routing-keys"]) != "[acemq.schedule.1s]" {
				t.Errorf("x-death %v: want the hop published to %s with routing key acemq.schedule.1s", d, Exchange)
			}
		} else if url[:6] != "memory" {
			t.Errorf("no x-death on the dead-lettered hop: %v", m.Headers)
		}
	})
}

// A hop another AceMQ library wrote (Java: due time a long, the original
// content type recorded) is delivered by our scheduler with that content
// type; one without x-schedule-content-type is delivered as
// application/json, the contract's default.
func TestAHopWrittenByAnotherLibraryIsDelivered(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		target := brokertest.Queue(t, c, "schedule.peer")
		cts := []string{"application/xml", ""}
		for i, ct := range cts {
			h := map[string]any{
				"x-acemq-type":   MessageType,
				HeaderExchange:   "",
				HeaderRoutingKey: target,
				HeaderDueAt:      time.Now().Add(1200 * time.Millisecond).UnixMilli(),
			}
			if ct != "" {
				h[HeaderContentType] = ct
			}
			if err := c.PublishRaw(context.Background(), acemq.RawMessage{
				Exchange: Exchange, RoutingKey: "acemq.schedule.1s", ContentType: "application/octet-stream",
				MessageID: fmt.Sprintf("peer-%d", i), Headers: h, Body: []byte(fmt.Sprintf("%d", i)),
			}); err != nil {
				t.Fatal(err)
			}
		}
		for range cts {
			m := brokertest.Pull(t, c, target)
			i, err := strconv.Atoi(string(m.Body))
			if err != nil || i < 0 || i >= len(cts) {
				t.Fatalf("delivered %q", m.Body)
			}
			wantCT := cts[i]
			if wantCT == "" {
				wantCT = "application/json"
			}
			if m.ContentType != wantCT || m.Envelope.Type != MessageType || m.Envelope.ID == fmt.Sprintf("peer-%d", i) {
				t.Errorf("delivered %q (%s, type %q, id %q); want %s, type %s, a fresh id", m.Body, m.ContentType, m.Envelope.Type, m.Envelope.ID, wantCT, MessageType)
			}
			for name := range m.Headers {
				if strings.HasPrefix(name, "x-schedule-") {
					t.Errorf("the delivery kept %s", name)
				}
			}
		}
	})
}

// The counters: each At counts scheduled, and a hop or a delivery; the
// scheduler counts every hop it makes and every delivery.
func TestTheCountersCountScheduledHopsAndDeliveries(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c := brokertest.Connect(t, "memory://schedule-counters", acemq.Config{MeterProvider: mp})
	startScheduler(t, c)
	q := brokertest.Queue(t, c, "schedule.counters")
	got := target(t, c, q)
	ctx := context.Background()
	// Now (delivered at once), and 1.5 s (a hop to 1s, then delivered).
	if err := After(ctx, c, "", q, "now", 0, WithCodec(acemq.Text())); err != nil {
		t.Fatal(err)
	}
	if err := After(ctx, c, "", q, "later", 1500*time.Millisecond, WithCodec(acemq.Text())); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("the scheduled messages did not arrive in 20 s")
		}
	}
	counts := map[string]int64{}
	brokertest.Eventually(t, "the scheduler's counters", func() bool {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if s, ok := m.Data.(metricdata.Sum[int64]); ok && len(s.DataPoints) > 0 {
					counts[m.Name] = s.DataPoints[0].Value
				}
			}
		}
		return counts["acemq.schedule.delivered"] == 2
	})
	if counts["acemq.schedule.scheduled"] != 2 || counts["acemq.schedule.hops"] != 1 {
		t.Fatalf("counters %v: want scheduled 2, delivered 2, hops 1", counts)
	}
}
