// Package brokertest runs pattern tests on both brokers: the in-process
// one and the test RabbitMQ node. It holds the few helpers every pattern
// package's tests share (connect, a fresh queue, polling for a condition,
// taking one message), so each test file reads as its behaviour only.
package brokertest

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// ForEachBroker runs body as a subtest on a memory:// broker named after
// the test and on the RabbitMQ node (testenv.AMQPURL: skipped only
// outside CI, failed under it).
func ForEachBroker(t *testing.T, body func(t *testing.T, url string)) {
	t.Run("memory", func(t *testing.T) { body(t, "memory://"+strings.ReplaceAll(t.Name(), "/", "-")) })
	t.Run("rabbitmq", func(t *testing.T) { body(t, testenv.AMQPURL(t)) })
}

// Connect connects to url with a silent logger and closes the Conn at the
// end of the test.
func Connect(t *testing.T, url string, opts ...acemq.Config) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Queue declares a fresh classic queue named after prefix, removed with
// its dead-letter half at the end of the test.
func Queue(t *testing.T, c *acemq.Conn, prefix string) string {
	t.Helper()
	q := testenv.Unique(prefix)
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	return q
}

// Eventually polls cond until it holds, failing the test after 10 s.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Consumers is the number of subscriptions on q.
func Consumers(t *testing.T, c *acemq.Conn, q string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Consumers
}

// Depth is the number of ready messages in q.
func Depth(t *testing.T, c *acemq.Conn, q string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// Publish sends n small JSON messages to q through the default exchange.
func Publish(t *testing.T, c *acemq.Conn, q string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.Publish(context.Background(), "", q, map[string]int{"n": i}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Pull takes one message from q, waiting up to 20 s for one (a 1 MiB
// payload on a loaded machine), and acks it.
func Pull(t *testing.T, c *acemq.Conn, q string) *acemq.Pulled {
	t.Helper()
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, ok, err := p.Pull(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message arrived in %q", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PullWhere pulls from q until a message for which match reports true,
// acking and logging each one that does not match (a leftover of an
// earlier test on a queue with a fixed name), and fails the test when
// none arrives within 20 s.
func PullWhere(t *testing.T, c *acemq.Conn, q string, match func(*acemq.Pulled) bool) *acemq.Pulled {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := Pull(t, c, q)
		if match(m) {
			return m
		}
		t.Logf("skipped a message on %s that is not this test's: id %q, reason %q", q, m.Envelope.ID, m.Envelope.Error)
		if time.Now().After(deadline) {
			t.Fatalf("no matching message arrived in %q", q)
		}
	}
}

// Overlay returns base with every non-zero field of each of over laid on
// it in order, for test helpers that add their own settings (a logger, an
// event log) to the ones a test passes.
func Overlay(base acemq.Config, over ...acemq.Config) acemq.Config {
	out := reflect.ValueOf(&base).Elem()
	for _, o := range over {
		v := reflect.ValueOf(o)
		for i := range v.NumField() {
			if f := v.Field(i); !f.IsZero() {
				out.Field(i).Set(f)
			}
		}
	}
	return base
}

// First returns xs[0], or the zero T when xs is empty: test helpers take
// an optional options struct as a variadic parameter.
func First[T any](xs []T) T {
	var z T
	if len(xs) > 0 {
		z = xs[0]
	}
	return z
}
