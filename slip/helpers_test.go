package slip

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// forEachBroker runs body on the in-process broker and on RabbitMQ.
func forEachBroker(t *testing.T, body func(t *testing.T, url string)) {
	t.Run("memory", func(t *testing.T) { body(t, "memory://"+strings.ReplaceAll(t.Name(), "/", "-")) })
	t.Run("rabbitmq", func(t *testing.T) { body(t, testenv.AMQPURL(t)) })
}

func connect(t *testing.T, url string) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.WithLogger(acemq.DiscardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// queue declares a fresh classic queue, removed with its dead-letter half
// at the end of the test.
func queue(t *testing.T, c *acemq.Conn) string {
	t.Helper()
	q := testenv.Unique("slip")
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.AsClassic())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	return q
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func depth(t *testing.T, c *acemq.Conn, q string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// pull takes one message from q, waiting up to 10 s for one to arrive,
// and acks it.
func pull(t *testing.T, c *acemq.Conn, q string) *acemq.Pulled {
	t.Helper()
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(10 * time.Second)
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
