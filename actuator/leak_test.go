package actuator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/actuator"
	"github.com/acemq-go/acemq/actuator/internal/brokertest"
	"github.com/acemq-go/acemq/actuator/internal/testenv"
	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/security"
)

// sink collects everything a Conn printed, for the leak check.
type sink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// add records v the ways a person might print it.
func (s *sink) add(label string, v any) {
	if v == nil {
		return
	}
	fmt.Fprintf(s, "%s: %v | %+v | %#v | %s\n", label, v, v, v, v)
	if err, ok := v.(error); ok {
		fmt.Fprintf(s, "%s error: %s\n", label, err.Error())
	}
	if b, err := json.Marshal(v); err == nil {
		fmt.Fprintf(s, "%s json: %s\n", label, b)
	}
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretAppearsInAnythingAConnPrints collects errors from the
// failure paths, events, slog output (text and JSON, debug level), spans,
// the metrics scrape, health and info pages, and String/%v/%+v of the
// Conn, its events, health and credentials, and fails if a password, the
// URL's password or a client key appears anywhere (behaviour §1.4).
func TestNoSecretAppearsInAnythingAConnPrints(t *testing.T) {
	out := &sink{}
	user := testenv.Unique("acemq-leak")
	urlPW, providerPW := randomSecret(t), randomSecret(t)
	testenv.BrokerUser(t, user, urlPW)
	plain := testenv.AMQPURL(t)
	hp := hostPort(t, plain)
	withPW := func(scheme, addr, pw string) string {
		return scheme + "://" + url.UserPassword(user, pw).String() + "@" + addr + "/"
	}
	clientSet, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keyBody := keyMaterial(string(clientSet.Client.KeyPEM))
	mismatched, _ := devcerts.Generate(devcerts.Options{})

	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	textLogger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	metrics, err := actuator.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = metrics.Shutdown(context.Background()) }()

	connect := func(label, raw string, opts ...acemq.Config) *acemq.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		all := brokertest.Overlay(acemq.Config{Logger: logger, ConnectionTimeout: 3 * time.Second}, opts...)
		c, err := acemq.Connect(ctx, raw, all)
		out.add(label, err)
		if c != nil {
			t.Cleanup(func() { _ = c.Close(context.Background()) })
		}
		return c
	}

	// Failure paths, each with a secret in play.
	closed := closedAddr(t)
	connect("wrong URL password", withPW("amqp", hp, urlPW+"x"))
	connect("nothing listening", withPW("amqp", closed, urlPW))
	connect("amqps to a plaintext port", withPW("amqps", hp, urlPW), acemq.Config{TLS: nil, DevelopmentCertificates: true})
	connect("development certificate", withPW("amqps", hostPort(t, testenv.AMQPSURL(t)), urlPW))
	connect("TLS with amqp", withPW("amqp", hp, urlPW), acemq.Config{TLSMode: security.ModeRequired})
	connect("provider and user info", withPW("amqp", hp, urlPW), acemq.Config{CredentialsProvider: security.Static(user, providerPW)})
	connect("wrong provider password", withoutUser(t, plain), acemq.Config{CredentialsProvider: security.Static(user, providerPW)})
	connect("mismatched client key", withoutUser(t, testenv.AMQPSURL(t)), acemq.Config{DevelopmentCertificates: true, ClientCertificate: security.CertificatePEM(clientSet.Client.CertPEM, mismatched.Client.KeyPEM)})
	connect("garbage URL", "amqp://"+user+":"+urlPW+"@[::1/")
	out.add("provider credentials", security.Credentials{User: user, Password: providerPW})
	out.add("client certificate", security.CertificatePEM(clientSet.Client.CertPEM, clientSet.Client.KeyPEM))
	out.add("devcerts pair", clientSet.Client)

	// A working Conn with the password in its URL, through a recovery.
	var events []acemq.Event
	var evMu sync.Mutex
	recovered := make(chan struct{}, 1)
	c := connect("working", withPW("amqp", hp, urlPW), acemq.Config{TracerProvider: tp, MeterProvider: metrics.MeterProvider(), RecoveryInterval: 100 * time.Millisecond, RecoveryIntervalMax: time.Second, OnEvent: func(e acemq.Event) {
		evMu.Lock()
		events = append(events, e)
		evMu.Unlock()
		if e.Kind == acemq.EventRecovered {
			recovered <- struct{}{}
		}
	}})
	if c == nil {
		t.Fatalf("the working Conn did not connect:\n%s", out)
	}
	c2 := acemq.Conn{} // the zero value must print safely too
	out.add("zero conn", &c2)
	q := classicQueue(t, c, "leak")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, "", q, item{1}, acemq.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, "acemq.no-such-exchange", "k", item{2}, acemq.SendOptions{})
	out.add("publish to a missing exchange", err)
	testenv.RabbitCtl(t, "close_all_user_connections", user, "acemq leak test")
	select {
	case <-recovered:
	case <-ctx.Done():
		t.Fatal("the working Conn did not recover within 30s")
	}
	if _, err := c.Publish(ctx, "", q, item{3}, acemq.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	out.add("conn", c)
	out.add("health", c.Health(ctx))
	h, err := actuator.Handler(c, actuator.WithMetrics(metrics))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	for _, p := range []string{actuator.DefaultMetricsPath, actuator.DefaultHealthPath, actuator.DefaultInfoPath} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(out, "GET %s: %s\n", p, body)
	}
	srv.Close()
	_ = c.Close(ctx)
	out.add("closed publish", func() error { _, err := c.Publish(ctx, "", q, item{4}, acemq.SendOptions{}); return err }())
	evMu.Lock()
	for _, e := range events {
		out.add("event", e)
	}
	kinds := len(events)
	evMu.Unlock()
	for _, s := range spans.Ended() {
		fmt.Fprintf(out, "span %s status %v attrs %v events %v\n", s.Name(), s.Status(), s.Attributes(), s.Events())
	}
	textLogger.Info("conn", "conn", c, "credentials", security.Credentials{User: user, Password: providerPW})
	logger.Info("conn", "credentials", security.Credentials{User: user, Password: providerPW})

	all := out.String()
	for name, secret := range map[string]string{"URL password": urlPW, "provider password": providerPW, "client key": keyBody} {
		if i := strings.Index(all, secret); i >= 0 {
			from, to := max(i-300, 0), min(i+len(secret)+100, len(all))
			t.Errorf("the %s appears in the output:\n...%s...", name, all[from:to])
		}
	}
	for _, want := range []string{user + ":***@", "user " + user + " (password hidden)", "recovered", "acemq_"} {
		if !strings.Contains(all, want) {
			t.Errorf("the collected output lacks %q, so the test did not see what it means to check", want)
		}
	}
	if kinds < 3 || len(spans.Ended()) == 0 {
		t.Errorf("collected %d events and %d spans; the recovery and the publishes should have made some", kinds, len(spans.Ended()))
	}
}

// keyMaterial returns a long run of a PEM key's base64 body.
func keyMaterial(pemText string) string {
	lines := strings.Split(pemText, "\n")
	return lines[1][:40]
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
