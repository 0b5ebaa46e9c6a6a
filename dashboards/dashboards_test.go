// Package dashboards_test checks the Grafana dashboard and the Prometheus
// alert rules in this folder against what the actuator really exports: it
// drives a Conn through every counted path on the in-process broker,
// scrapes /acemq-metrics, and requires every metric a query names to be a
// family of that scrape.
package dashboards_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
	_ "modernc.org/sqlite"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type job struct {
	N int `json:"n"`
}

// scrape exercises every path the contract counts and returns the
// families the actuator exports.
func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := actuator.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	name := "dashboards-" + strings.ReplaceAll(t.Name(), "/", "-")
	conn, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), MeterProvider: m.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	broker := memory.Lookup(name)
	if err := conn.Apply(ctx, acemq.NewTopology().Queue("jobs", acemq.QueueOptions{}).DeadLetters("jobs").Queue("out", acemq.QueueOptions{Type: acemq.Classic}).Queue("prices", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	// Consume: accepted, retried (through a rung that is gone), rejected
	// (dead-lettered), and a set-aside whose publish the broker refuses.
	settled := make(chan acemq.Settlement, 16)
	fallbacks := make(chan acemq.Fallback, 16)
	hooked, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), MeterProvider: m.MeterProvider(), OnSettlement: func(s acemq.Settlement) { settled <- s }, OnFallback: func(f acemq.Fallback) { fallbacks <- f }})
	if err != nil {
		t.Fatal(err)
	}
	defer hooked.Close(context.Background())
	k, err := acemq.Consume(ctx, hooked, "jobs", func(_ context.Context, msg *acemq.Message[job]) acemq.Decision {
		switch msg.Payload.N {
		case 1:
			if msg.Envelope.Attempt == 1 {
				return acemq.Retry(errors.New("flaky"))
			}
		case 2:
			return acemq.Reject(errors.New("bad"))
		case 3:
			broker.NackNext(1) // the set-aside copy is the next confirmed publish
			return acemq.Reject(errors.New("bad, and the .dlq refuses it"))
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.Fixed(3, 50*time.Millisecond).WaitInBrokerFrom(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	// The consumer declared its rung; losing it makes the retry count a
	// missing rung (the message then waits in the consumer).
	if _, err := conn.DeleteQueue(ctx, acemq.RetryQueue("jobs", 50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	// One at a time, so the refused set-aside is the only publish the
	// broker's NackNext can meet.
	for n := range 4 {
		if _, err := conn.Publish(ctx, "", "jobs", job{N: n}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		for final := false; !final; {
			select {
			case s := <-settled:
				final = s.Outcome != acemq.ConsumeRetried
			case <-ctx.Done():
				t.Fatalf("message %d was not settled", n)
			}
		}
	}
	// The refused set-aside has happened (so the broker's one nack is
	// spent) before anything else publishes.
	for {
		select {
		case f := <-fallbacks:
			if f.Kind != "set_aside_failed" {
				continue
			}
		case <-ctx.Done():
			t.Fatal("the refused set-aside was not reported")
		}
		break
	}
	// Request/reply.
	resp, err := rpc.Respond(ctx, conn, "prices", func(_ context.Context, msg *acemq.Message[job]) (job, error) {
		return job{N: msg.Payload.N * 2}, nil
	}, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close(context.Background())
	req, err := rpc.NewRequester(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close(context.Background())
	if got, err := rpc.Request[job, job](ctx, req, "", "prices", job{N: 21}); err != nil || got.N != 42 {
		t.Fatalf("request: %v %v", got, err)
	}
	// Outbox: a record committed, then published by a relay sweep.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := outbox.NewStore(db, sqlstore.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Add(ctx, tx, conn, "", "out", job{N: 7}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(conn, store)
	if err != nil {
		t.Fatal(err)
	}
	if sw := relay.SweepOnce(ctx); sw.Published != 1 {
		t.Fatalf("outbox sweep %+v", sw)
	}
	_ = relay.Close(ctx)

	h, err := actuator.Handler(conn, actuator.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	r, err := http.Get(srv.URL + actuator.DefaultMetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	return fams
}

var metricRE = regexp.MustCompile(`\bacemq_[a-z0-9_]+`)

// family maps a name a query uses to the family it belongs to: a
// histogram's _bucket, _sum and _count series are its family's.
func family(name string, fams map[string]*dto.MetricFamily) string {
	if _, ok := fams[name]; ok {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				return base
			}
		}
	}
	return ""
}

// exprs collects every "expr" and templating "query" in a dashboard.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expr" || k == "query") {
				*out = append(*out, s)
				continue
			}
			exprs(e, out)
		}
	case []any:
		for _, e := range x {
			exprs(e, out)
		}
	}
}

// The contract's families (§5.1) that an operator's dashboard must show.
var contractFamilies = []string{
	"acemq_publish_total", "acemq_publish_duration_seconds", "acemq_consume_total", "acemq_consume_duration_seconds",
	"acemq_consume_attempts", "acemq_consume_in_flight", "acemq_messages_retried_total", "acemq_messages_dead_lettered_total",
	"acemq_messages_set_aside_failed_total", "acemq_retry_rung_missing_total", "acemq_request_total", "acemq_request_duration_seconds",
	"acemq_outbox_total", "acemq_outbox_lag_seconds",
}

func checkNames(t *testing.T, what string, queries []string, fams map[string]*dto.MetricFamily) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metricRE.FindAllString(q, -1) {
			f := family(name, fams)
			if f == "" {
				t.Errorf("%s: %s names %s, which the actuator does not export; families: %v", what, q, name, names(fams))
				continue
			}
			used[f] = true
		}
	}
	return used
}

func names(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range fams {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestEveryDashboardAndAlertQueryNamesAnExportedFamily(t *testing.T) {
	fams := scrape(t)
	for _, f := range contractFamilies {
		if _, ok := fams[f]; !ok {
			t.Errorf("the exercise did not make the actuator export %s; have %v", f, names(fams))
		}
	}

	raw, err := os.ReadFile("grafana-acemq.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana-acemq.json does not parse: %v", err)
	}
	var qs []string
	exprs(dash, &qs)
	if len(qs) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	used := checkNames(t, "grafana-acemq.json", qs, fams)
	for _, f := range contractFamilies {
		if !used[f] {
			t.Errorf("the dashboard shows nothing of %s", f)
		}
	}

	raw, err = os.ReadFile("prometheus-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("prometheus-alerts.yml does not parse: %v", err)
	}
	var aqs []string
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			aqs = append(aqs, r.Expr)
			alerts[r.Alert] = true
		}
	}
	used = checkNames(t, "prometheus-alerts.yml", aqs, fams)
	for _, f := range []string{"acemq_messages_dead_lettered_total", "acemq_messages_set_aside_failed_total", "acemq_outbox_lag_seconds", "acemq_consume_in_flight"} {
		if !used[f] {
			t.Errorf("no alert watches %s", f)
		}
	}
	for _, a := range []string{"AceMQDeadLettersGrowing", "AceMQSetAsideFailed", "AceMQOutboxLagHigh", "AceMQConsumerStalled"} {
		if !alerts[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}

// The check itself fails on a name the actuator does not export.
func TestAQueryNamingAnUnknownMetricIsCaught(t *testing.T) {
	fams := map[string]*dto.MetricFamily{"acemq_consume_total": {}}
	if family("acemq_consume_totals", fams) != "" || family("acemq_consume_total_bucket", fams) != "" {
		t.Fatal("family accepted a name that is not exported")
	}
	h := dto.MetricType_HISTOGRAM
	fams["acemq_publish_duration_seconds"] = &dto.MetricFamily{Type: &h}
	if family("acemq_publish_duration_seconds_bucket", fams) != "acemq_publish_duration_seconds" {
		t.Fatal("a histogram's bucket series is not its family's")
	}
}
