package rpc_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// broker is where a test runs: the in-memory broker, or the dev RabbitMQ.
type broker struct {
	name string
	url  func(t *testing.T) string
}

var brokers = []broker{
	{"memory", func(t *testing.T) string { return "memory://" + strings.ReplaceAll(t.Name(), "/", "-") }},
	{"rabbitmq", func(t *testing.T) string { return testenv.AMQPURL(t) }},
}

// forEachBroker runs body once per broker as a subtest.
func forEachBroker(t *testing.T, body func(t *testing.T, url string)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) { body(t, b.url(t)) })
	}
}

func connect(t *testing.T, url string, opts ...acemq.Config) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...)
	c, err := acemq.Connect(ctx, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// requestQueue declares a fresh classic queue and removes it (and its
// dead-letter half) at the end of the test.
func requestQueue(t *testing.T, c *acemq.Conn, prefix string) string {
	t.Helper()
	ctx := context.Background()
	q := testenv.Unique(prefix)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	return q
}

// watch consumes queue (which must exist) and hands each envelope to the
// returned channel.
func watch(t *testing.T, c *acemq.Conn, queue string) <-chan *acemq.Message[json.RawMessage] {
	t.Helper()
	ch := make(chan *acemq.Message[json.RawMessage], 64)
	k, err := acemq.Consume(context.Background(), c, queue, func(_ context.Context, m *acemq.Message[json.RawMessage]) acemq.Decision {
		ch <- m
		return acemq.Accept()
	}, acemq.ConsumerConfig{NoDeadLetterDeclaration: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return ch
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived within 10s")
	}
	var zero T
	return zero
}

// within runs f and fails the test if it has not returned within d: a
// request that never comes back fails the test instead of hanging it.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("still waiting after %s", d)
	}
	var zero T
	return zero
}
