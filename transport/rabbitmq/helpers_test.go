package rabbitmq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

const wait = 10 * time.Second

func dial(t testing.TB, cfg transport.Config) transport.Connection {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = testenv.AMQPURL(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, _, err := Driver{}.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openChannel(t testing.TB, c transport.Connection) transport.Channel {
	t.Helper()
	ch, err := c.Channel(context.Background())
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func openPublisher(t testing.TB, c transport.Connection) transport.Publisher {
	t.Helper()
	p, err := c.Publisher(context.Background(), true)
	if err != nil {
		t.Fatalf("publisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// tempQueue declares a durable queue with a unique name and deletes it when
// the test ends (durable: RabbitMQ 4 denies transient non-exclusive queues).
func tempQueue(t testing.TB, c transport.Connection, prefix string, args transport.Table) string {
	t.Helper()
	ch := openChannel(t, c)
	name := testenv.Unique(prefix)
	if _, err := ch.DeclareQueue(context.Background(), transport.QueueSpec{Name: name, Durable: true, Args: args}); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	t.Cleanup(func() {
		cc, _, err := Driver{}.Dial(context.Background(), transport.Config{URL: testenv.AMQPURL(t)})
		if err != nil {
			return
		}
		defer cc.Close()
		if dch, err := cc.Channel(context.Background()); err == nil {
			_, _ = dch.DeleteQueue(context.Background(), name)
			_ = dch.Close()
		}
	})
	return name
}

// confirmOne publishes msg and waits for its confirmation.
func confirmOne(t testing.TB, p transport.Publisher, msg *transport.Message) transport.Confirmation {
	t.Helper()
	got := make(chan transport.Confirmation, 1)
	if err := p.Publish(context.Background(), msg, func(c transport.Confirmation) { got <- c }); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case c := <-got:
		return c
	case <-time.After(wait):
		t.Fatalf("no confirmation within %s", wait)
	}
	return transport.Confirmation{}
}

func closedWithin(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not close within %s", what, d)
	}
}

func errorsIsNotWritten(err error) bool { return errors.Is(err, transport.ErrNotWritten) }
