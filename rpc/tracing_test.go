package rpc_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/acemq-go/acemq/rpc"
)

// traced is a Conn and a Requester sharing one in-memory span recorder
// and one manual metric reader.
type traced struct {
	conn    *acemq.Conn
	req     *rpc.Requester
	tp      *sdktrace.TracerProvider
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	settled chan acemq.Settlement
}

func newTraced(t *testing.T) *traced {
	t.Helper()
	tr := &traced{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), settled: make(chan acemq.Settlement, 16)}
	tr.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tr.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tr.reader))
	t.Cleanup(func() {
		_ = tr.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	// The providers are given to the Conn only: the requester uses the
	// Conn's unless given its own.
	tr.conn = connect(t, "memory://"+strings.ReplaceAll(t.Name(), "/", "-"), acemq.Config{TracerProvider: tr.tp, MeterProvider: mp, OnSettlement: func(s acemq.Settlement) { tr.settled <- s }})
	tr.req = newRequester(t, tr.conn)
	return tr
}

// only returns the one ended span called name.
func (tr *traced) only(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range tr.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range tr.spans.Ended() {
			names = append(names, s.Name())
		}
		t.Fatalf("%d spans named %q, want 1; ended: %q", len(found), name, names)
	}
	return found[0]
}

// requestCount returns acemq.request.total for routing key and outcome.
func (tr *traced) requestCount(t *testing.T, key, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tr.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != "acemq.request.total" || !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				k, _ := p.Attributes.Value("routing.key")
				o, _ := p.Attributes.Value("outcome")
				if k.AsString() == key && o.AsString() == outcome {
					n += p.Value
				}
			}
		}
	}
	return n
}

// attrs renders a span's attributes as key → value text.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

func assertAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	if got := attrs(s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s attributes\n got  %v\n want %v", s.Name(), got, want)
	}
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

// assertParent checks child's parent is parent's span, remote (it came
// from message headers) or not.
func assertParent(t *testing.T, child, parent sdktrace.ReadOnlySpan, remote bool) {
	t.Helper()
	p := child.Parent()
	if p.TraceID() != parent.SpanContext().TraceID() || p.SpanID() != parent.SpanContext().SpanID() || p.IsRemote() != remote {
		t.Errorf("%s: parent %s/%s (remote %v), want %s %s/%s (remote %v)", child.Name(), p.TraceID(), p.SpanID(), p.IsRemote(),
			parent.Name(), parent.SpanContext().TraceID(), parent.SpanContext().SpanID(), remote)
	}
}

func TestRequestSpanIsTheParentOfItsPublishAndTheReplyContinuesItsTrace(t *testing.T) {
	tr := newTraced(t)
	q := requestQueue(t, tr.conn, "rpc.traced")
	seen := make(chan acemq.Envelope, 1)
	respond(t, tr.conn, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
		seen <- m.Envelope
		return priceOf(ctx, m)
	})
	ctx, caller := tr.tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := rpc.Request[quote, price](ctx, tr.req, "", q, quote{SKU: "t", N: 1}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	env := receive(t, seen)
	// The request and the reply are both settled: every span has ended.
	for range 2 {
		receive(t, tr.settled)
	}

	request := tr.only(t, q+" request")
	if request.SpanKind() != trace.SpanKindClient {
		t.Errorf("request span kind %v, want client", request.SpanKind())
	}
	assertAttrs(t, request, map[string]string{
		"messaging.system":                  "rabbitmq",
		"messaging.destination.name":        q,
		"messaging.operation":               "request",
		"messaging.message.id":              env.ID,
		"messaging.message.conversation_id": env.CorrelationID,
		"messaging.acemq.message_type":      q,
		"messaging.acemq.outcome":           "answered",
	})
	if request.Status().Code != codes.Unset || len(request.Events()) != 0 {
		t.Errorf("answered request: status %v, events %v; want unset and none", request.Status(), request.Events())
	}
	assertParent(t, request, tr.only(t, "caller"), false)

	publish := tr.only(t, q+" publish")
	assertParent(t, publish, request, false)
	// The request carries the publish span's context, in the request's trace.
	tp, _ := env.Header("traceparent")
	if want := fmt.Sprintf("00-%s-%s-01", request.SpanContext().TraceID(), publish.SpanContext().SpanID()); tp != want {
		t.Errorf("the request's traceparent %v, want %s", tp, want)
	}
	process := tr.only(t, q+" process")
	assertParent(t, process, publish, true)
	replyPublish := tr.only(t, tr.req.ReplyQueue()+" publish")
	assertParent(t, replyPublish, process, false)
	replyProcess := tr.only(t, tr.req.ReplyQueue()+" process")
	assertParent(t, replyProcess, replyPublish, true)
	if v := attrs(replyProcess)["messaging.acemq.outcome"]; v != "acked" {
		t.Errorf("the reply's process span outcome %q, want acked", v)
	}
}

func TestRequestSpanOutcomeAndStatusAreTheCountersWord(t *testing.T) {
	cases := []struct {
		name    string
		outcome string
		// run makes the request; it returns the exchange and routing key
		// used and the request's envelope id ("" when it was never built).
		run func(t *testing.T, tr *traced) (exchange, key, id string, err error)
	}{
		{"answered", "answered", func(t *testing.T, tr *traced) (string, string, string, error) {
			q := requestQueue(t, tr.conn, "rpc.ok")
			ids := make(chan string, 1)
			respond(t, tr.conn, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
				ids <- m.Envelope.ID
				return priceOf(ctx, m)
			})
			_, err := rpc.Request[quote, price](context.Background(), tr.req, "", q, quote{N: 1})
			return "", q, receive(t, ids), err
		}},
		{"error reply", "failed", func(t *testing.T, tr *traced) (string, string, string, error) {
			q := requestQueue(t, tr.conn, "rpc.err")
			respond(t, tr.conn, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
				return price{}, errors.New("no price")
			})
			_, err := rpc.Request[quote, price](context.Background(), tr.req, "", q, quote{N: 1})
			var re *rpc.ResponderError
			if !errors.As(err, &re) {
				t.Fatalf("err %v, want a ResponderError", err)
			}
			return "", q, re.ID, err
		}},
		{"timed out", "timed_out", func(t *testing.T, tr *traced) (string, string, string, error) {
			q := requestQueue(t, tr.conn, "rpc.silent")
			_, err := rpc.Request[quote, price](context.Background(), tr.req, "", q, quote{}, rpc.Timeout(20*time.Millisecond))
			var te *rpc.TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("err %v, want a TimeoutError", err)
			}
			return "", q, te.ID, err
		}},
		{"unroutable request", "failed", func(t *testing.T, tr *traced) (string, string, string, error) {
			_, err := rpc.Request[quote, price](context.Background(), tr.req, "", "rpc.nowhere", quote{},
				rpc.WithSendOptions(acemq.SendOptions{Mandatory: true}))
			var pe *acemq.PublishError
			if !acemq.IsUnroutable(err) || !errors.As(err, &pe) {
				t.Fatalf("err %v, want unroutable", err)
			}
			return "", "rpc.nowhere", pe.MessageID, err
		}},
		{"closed requester", "failed", func(t *testing.T, tr *traced) (string, string, string, error) {
			if err := tr.req.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, err := rpc.Request[quote, price](context.Background(), tr.req, "rpc.exchange", "rpc.closed", quote{})
			if !errors.Is(err, acemq.ErrClosed) {
				t.Fatalf("err %v, want ErrClosed", err)
			}
			return "rpc.exchange", "rpc.closed", "", err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTraced(t)
			exchange, key, id, err := tc.run(t, tr)
			dest := exchange // the exchange, or the key on the default exchange
			if dest == "" {
				dest = key
			}
			s := tr.only(t, dest+" request")
			got := attrs(s)
			if got["messaging.acemq.outcome"] != tc.outcome || got["messaging.message.id"] != id || got["messaging.destination.name"] != dest ||
				got["messaging.acemq.message_type"] != key || got["messaging.operation"] != "request" || got["messaging.system"] != "rabbitmq" {
				t.Errorf("attributes %v: want outcome %s, id %q, destination %s, type %s", got, tc.outcome, id, dest, key)
			}
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("kind %v, want client", s.SpanKind())
			}
			if _, ok := got["messaging.message.conversation_id"]; !ok && tc.name != "closed requester" {
				t.Errorf("no conversation id: %v", got)
			}
			if n := tr.requestCount(t, key, tc.outcome); n != 1 {
				t.Errorf("acemq.request.total{%s, %s} = %d, want 1 (the span's word)", key, tc.outcome, n)
			}
			if tc.outcome == "answered" {
				if err != nil || s.Status().Code != codes.Unset {
					t.Errorf("answered: err %v, status %v", err, s.Status())
				}
				return
			}
			if s.Status().Code != codes.Error || s.Status().Description != err.Error() {
				t.Errorf("status %v, want ERROR %q", s.Status(), err.Error())
			}
			if ev := s.Events(); len(ev) != 1 || ev[0].Name != "exception" || !hasAttr(ev[0].Attributes, "exception.message", err.Error()) {
				t.Errorf("events %v, want the recorded error", ev)
			}
		})
	}
}

// TestRequesterProvidersOverrideTheConns: rpc.WithTracerProvider and
// rpc.WithMeterProvider send the request span and metrics elsewhere, while
// the request's publish span stays with the Conn's provider.
func TestRequesterProvidersOverrideTheConns(t *testing.T) {
	tr := newTraced(t)
	own := tracetest.NewSpanRecorder()
	ownTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(own))
	ownReader := sdkmetric.NewManualReader()
	ownMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(ownReader))
	t.Cleanup(func() {
		_ = ownTP.Shutdown(context.Background())
		_ = ownMP.Shutdown(context.Background())
	})
	req := newRequester(t, tr.conn, rpc.WithTracerProvider(ownTP), rpc.WithMeterProvider(ownMP))
	q := requestQueue(t, tr.conn, "rpc.own")
	respond(t, tr.conn, q, priceOf)
	if _, err := rpc.Request[quote, price](context.Background(), req, "", q, quote{N: 1}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range own.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 1 || names[0] != q+" request" {
		t.Fatalf("the requester's own provider ended %q, want only %q", names, q+" request")
	}
	for _, s := range tr.spans.Ended() {
		if s.Name() == q+" request" {
			t.Fatalf("the Conn's provider got the request span although the requester has its own")
		}
	}
	tr.only(t, q+" publish")
	var rm metricdata.ResourceMetrics
	if err := ownReader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == "acemq.request.total"
		}
	}
	if !found {
		t.Fatal("acemq.request.total did not reach the requester's own meter provider")
	}
	if n := tr.requestCount(t, q, "answered"); n != 0 {
		t.Fatalf("the Conn's meter provider counted %d requests, want 0", n)
	}
}
