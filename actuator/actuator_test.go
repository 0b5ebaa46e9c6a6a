package actuator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/actuator/internal/alarmtest"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/goleak"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type order struct {
	ID string `json:"id"`
}

type fixture struct {
	conn *acemq.Conn
	srv  *httptest.Server
}

func setup(t *testing.T, name string, opts ...actuator.Option) *fixture {
	t.Helper()
	ctx := context.Background()
	m, err := actuator.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(ctx) })
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), MeterProvider: m.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	h, err := actuator.Handler(c, append([]actuator.Option{actuator.WithMetrics(m), actuator.WithApplication("orders", "1.4.2")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{conn: c, srv: srv}
}

func get(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestMetricsScrapeHasTheContractFamiliesAndParses(t *testing.T) {
	ctx := context.Background()
	f := setup(t, "act-metrics")
	if err := f.conn.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 1)
	cons, err := acemq.Consume(ctx, f.conn, "orders", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		done <- struct{}{}
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[order](f.conn, "", "orders", acemq.PublisherConfig{}).SendWith(ctx, order{ID: "1"}, acemq.SendOptions{Type: "order.placed"}); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := cons.Close(ctx); err != nil { // drained: the settlement is counted
		t.Fatal(err)
	}
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-metrics")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, body)
	}
	for _, name := range []string{
		"acemq_publish_total", "acemq_publish_duration_seconds", "acemq_consume_total",
		"acemq_consume_duration_seconds", "acemq_consume_attempts", "acemq_consume_in_flight",
	} {
		if _, ok := fams[name]; !ok {
			t.Errorf("family %s missing; have %v", name, keys(fams))
		}
	}
	pub := fams["acemq_publish_total"]
	if pub == nil || len(pub.Metric) == 0 {
		t.Fatalf("no acemq_publish_total:\n%s", body)
	}
	labels := map[string]string{}
	for _, l := range pub.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"exchange": "", "routing_key": "orders", "message_type": "order.placed", "transport": "memory", "outcome": "confirmed"}
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			t.Errorf("acemq_publish_total label %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if !strings.Contains(body, `acemq_consume_total{message_type="order.placed",outcome="acked",queue="orders",transport="memory"} 1`) {
		t.Errorf("no acked consume line in\n%s", body)
	}
	if strings.Contains(body, "_total_total") || strings.Contains(body, "routing.key") {
		t.Errorf("bad names in\n%s", body)
	}
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestHealthWhenBlockedIs200UpWithTheReason(t *testing.T) {
	f := setup(t, "act-blocked")
	b := memory.Lookup("act-blocked")
	held := alarmtest.BlockAndWait(t, f.conn, b, "low on memory")
	start := time.Now()
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health")
	t.Logf("/acemq-health answered in %s while blocked", time.Since(start))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.HasSuffix(body, "}\n") {
		t.Errorf("body does not end with a newline: %q", body)
	}
	want := `{"status":"UP","components":{"acemq":{"status":"UP","details":{"transport":"memory","open":true,"blocked":true,"inFlight":0,"blockedReason":"low on memory","detail":"the broker has blocked this connection; publishing is paused: low on memory"}}}}` + "\n"
	if body != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	b.Unblock()
	alarmtest.HeldConfirms(t, held)
	if _, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health"); strings.Contains(body, `"blocked":true`) {
		t.Fatalf("still blocked after unblock: %s", body)
	}
}

func TestHealthWhenOpenIsUp(t *testing.T) {
	f := setup(t, "act-up")
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health")
	want := `{"status":"UP","components":{"acemq":{"status":"UP","details":{"transport":"memory","open":true,"blocked":false,"inFlight":0}}}}` + "\n"
	if resp.StatusCode != 200 || body != want {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestHealthWhenClosedIs503Down(t *testing.T) {
	f := setup(t, "act-closed")
	if err := f.conn.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got struct {
		Status     string
		Components map[string]struct {
			Status  string
			Details map[string]any
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "DOWN" || got.Components["acemq"].Status != "DOWN" || got.Components["acemq"].Details["detail"] != "the connection has been closed" || got.Components["acemq"].Details["open"] != false {
		t.Fatalf("body %s", body)
	}
	resp, body = get(t, http.MethodHead, f.srv.URL+"/acemq-health")
	if resp.StatusCode != http.StatusServiceUnavailable || body != "" || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("HEAD: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

func TestHealthWithoutAConnectionIsUnknown(t *testing.T) {
	h, err := actuator.Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acemq-health", nil))
	if rec.Code != 200 || rec.Body.String() != `{"status":"UNKNOWN"}`+"\n" {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acemq-info", nil))
	if rec.Body.String() != `{"library":"acemq-go-amqp","libraryVersion":"unknown"}`+"\n" {
		t.Fatalf("info %q", rec.Body.String())
	}
}

func TestHealthIncludesApplicationChecks(t *testing.T) {
	f := setup(t, "act-checks", actuator.WithChecks(acemq.CheckFunc("db", func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.StatusDegraded, Detail: "replica lag"}
	})))
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health")
	want := `{"status":"DEGRADED","components":{"acemq":{"status":"UP","details":{"transport":"memory","open":true,"blocked":false,"inFlight":0}},"db":{"status":"DEGRADED","details":{"detail":"replica lag"}}}}` + "\n"
	if resp.StatusCode != 200 || body != want {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestInfoNamesLibraryTransportAndSortedCapabilities(t *testing.T) {
	f := setup(t, "act-info")
	resp, body := get(t, http.MethodGet, f.srv.URL+"/acemq-info")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" || !strings.HasSuffix(body, "\n") {
		t.Fatalf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var got struct {
		Library, LibraryVersion, Name, Version, Transport string
		Capabilities                                      []string
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Library != "acemq-go-amqp" || got.LibraryVersion == "" || got.Name != "orders" || got.Version != "1.4.2" || got.Transport != "memory" {
		t.Fatalf("info %s", body)
	}
	if !strings.HasPrefix(body, `{"library":"acemq-go-amqp","libraryVersion":`) {
		t.Fatalf("field order: %s", body)
	}
	if len(got.Capabilities) == 0 {
		t.Fatalf("no capabilities: the memory:// driver has some (Conn.Capabilities): %s", body)
	}
	for i := 1; i < len(got.Capabilities); i++ {
		if got.Capabilities[i-1] > got.Capabilities[i] {
			t.Fatalf("capabilities not sorted: %v", got.Capabilities)
		}
	}
}

func TestUnknownPathIs404NamingThePaths(t *testing.T) {
	f := setup(t, "act-404")
	resp, body := get(t, http.MethodGet, f.srv.URL+"/nope")
	if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		body != "Nothing here. Try /acemq-metrics, /acemq-health or /acemq-info.\n" {
		t.Fatalf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestOtherMethodsAre405(t *testing.T) {
	f := setup(t, "act-405")
	resp, body := get(t, http.MethodPost, f.srv.URL+"/acemq-health")
	if resp.StatusCode != 405 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || body != "Only GET and HEAD.\n" {
		t.Fatalf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestConfiguredPathsServeAndAreValidated(t *testing.T) {
	f := setup(t, "act-paths", actuator.WithPaths("/m", "/h", "/i"))
	if resp, _ := get(t, http.MethodGet, f.srv.URL+"/h"); resp.StatusCode != 200 {
		t.Fatalf("/h: %d", resp.StatusCode)
	}
	if _, body := get(t, http.MethodGet, f.srv.URL+"/acemq-health"); body != "Nothing here. Try /m, /h or /i.\n" {
		t.Fatalf("404 body %q", body)
	}
	for _, p := range [][3]string{{"m", "/h", "/i"}, {"/a", "/a", "/i"}, {"/m", "/h", "/h"}} {
		if _, err := actuator.Handler(nil, actuator.WithPaths(p[0], p[1], p[2])); err == nil {
			t.Errorf("paths %v accepted", p)
		}
	}
}

func TestListenAndServeStopsWithTheContext(t *testing.T) {
	h, err := actuator.Handler(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- actuator.Serve(ctx, ln, h) }()
	resp, _ := get(t, http.MethodGet, "http://"+ln.Addr().String()+"/acemq-health")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := actuator.ListenAndServe(ctx2, "127.0.0.1:0", h); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestCounterNamesTranslateToOneTotalSuffix(t *testing.T) {
	ctx := context.Background()
	m, err := actuator.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)
	meter := m.MeterProvider().Meter(acemq.InstrumentationScope)
	want := map[string]string{
		"acemq.messages.retried.total":       "acemq_messages_retried_total",
		"acemq.messages.dead.lettered.total": "acemq_messages_dead_lettered_total",
		"acemq.messages.set.aside.failed":    "acemq_messages_set_aside_failed_total",
		"acemq.retry.rung.missing":           "acemq_retry_rung_missing_total",
	}
	for name := range want {
		c, err := meter.Int64Counter(name, metric.WithUnit("{message}"))
		if err != nil {
			t.Fatal(err)
		}
		c.Add(ctx, 1)
	}
	h, err := actuator.Handler(nil, actuator.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/acemq-metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	for otel, prom := range want {
		if _, ok := fams[prom]; !ok {
			t.Errorf("%s is not %s; have %v", otel, prom, keys(fams))
		}
	}
}
