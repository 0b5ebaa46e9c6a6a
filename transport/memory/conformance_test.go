package memory

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/transporttest"
)

func TestConformance(t *testing.T) {
	runConformance(t, "conformance-"+t.Name(), func(c transport.Connection) transport.Connection { return c })
}

// TestConformanceDirect runs the suite with every subscription made
// through ConsumeDirect (what the engine uses), forwarded to the channel
// the suite reads by a goroutine of the test's.
func TestConformanceDirect(t *testing.T) {
	runConformance(t, "conformance-direct-"+t.Name(), func(c transport.Connection) transport.Connection { return directConn{c} })
}

// runConformance runs the transport suite on the memory broker name, each
// connection dialled passed through wrap.
func runConformance(t *testing.T, name string, wrap func(transport.Connection) transport.Connection) {
	t.Cleanup(func() { Delete(name) })
	dial := func(t *testing.T, onBlocked func(bool, string)) transport.Connection {
		t.Helper()
		c, _, err := Driver{}.Dial(context.Background(), transport.Config{URL: "memory://" + name, OnBlocked: onBlocked})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return wrap(c)
	}
	transporttest.Run(t, transporttest.Harness{
		Dial:              func(t *testing.T) transport.Connection { return dial(t, nil) },
		DialWithOnBlocked: dial,
		Block:             func(_ *testing.T, reason string) { Lookup(name).Block(reason) },
		Unblock:           func(*testing.T) { Lookup(name).Unblock() },
		DropConnections:   func(*testing.T) { Lookup(name).DropConnections() },
		// memory:// counts as RabbitMQ 4.3 does.
		AcquiredCount: true,
	})
}

// directConn opens channels whose Consume goes through ConsumeDirect.
type directConn struct{ transport.Connection }

func (c directConn) Channel(ctx context.Context) (transport.Channel, error) {
	ch, err := c.Connection.Channel(ctx)
	if err != nil {
		return nil, err
	}
	return directChannel{ch.(*channel)}, nil
}

type directChannel struct{ *channel }

// Consume reads a direct consumer on a goroutine that ends when next
// reports false or the consumer is stopped.
func (ch directChannel) Consume(ctx context.Context, spec transport.ConsumeSpec) (<-chan transport.Delivery, error) {
	c, err := ch.subscribe(ctx, spec, true)
	if err != nil {
		return nil, err
	}
	out := make(chan transport.Delivery)
	go func() {
		defer close(out)
		for d, ok := c.next(); ok; d, ok = c.next() {
			select {
			case out <- d:
			case <-c.stop:
				return // d stays unacked: the channel's end requeues it
			}
		}
	}()
	return out, nil
}
