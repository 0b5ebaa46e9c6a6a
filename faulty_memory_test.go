package acemq

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// faulty+memory:// is memory:// with failures a test scripts per broker
// (injectFaults): publishing dials that fail with a chosen error, so a
// recovery attempt fails; and consumes refused on chosen queues with 406
// on the channel, the connection staying up, the way RabbitMQ refuses a
// stream consumer on a node where the stream's replica has not started
// yet after a partition.
func init() { transport.Register("faulty+memory", faultyDialer{}) }

// memFaults is the failures scripted for one broker.
type memFaults struct {
	dialsLeft atomic.Int32 // publishing dials still to fail
	dialErr   error

	mu           sync.Mutex
	consumesLeft map[string]int // queue → consumes still to refuse
	refused      atomic.Int32   // consumes refused so far
}

var brokerFaults sync.Map // broker name → *memFaults

// injectFaults scripts failures for the memory broker name (reached as
// faulty+memory://name) and removes them, and the broker, at cleanup.
func injectFaults(t *testing.T, name string) *memFaults {
	f := &memFaults{consumesLeft: map[string]int{}}
	brokerFaults.Store(name, f)
	t.Cleanup(func() { brokerFaults.Delete(name); memory.Delete(name) })
	return f
}

// refuseConsumes makes the next n consumes on queue fail.
func (f *memFaults) refuseConsumes(queue string, n int) {
	f.mu.Lock()
	f.consumesLeft[queue] = n
	f.mu.Unlock()
}

func (f *memFaults) takeDial() bool {
	for n := f.dialsLeft.Load(); n > 0; n = f.dialsLeft.Load() {
		if f.dialsLeft.CompareAndSwap(n, n-1) {
			return true
		}
	}
	return false
}

func (f *memFaults) takeConsume(queue string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.consumesLeft[queue] > 0 {
		f.consumesLeft[queue]--
		f.refused.Add(1)
		return true
	}
	return false
}

type faultyDialer struct{}

func (faultyDialer) Name() string           { return memory.Driver{}.Name() }
func (faultyDialer) Capabilities() []string { return memory.Driver{}.Capabilities() }

func (faultyDialer) Dial(ctx context.Context, cfg transport.Config) (transport.Connection, int, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, 0, err
	}
	v, _ := brokerFaults.Load(u.Host)
	f, _ := v.(*memFaults)
	if f != nil && cfg.Purpose == transport.Publishing && f.takeDial() {
		return nil, 0, f.dialErr
	}
	u.Scheme = "memory"
	cfg.URL = u.String()
	c, frameMax, err := memory.Driver{}.Dial(ctx, cfg)
	if err != nil || f == nil {
		return c, frameMax, err
	}
	return faultyConn{Connection: c, faults: f}, frameMax, nil
}

type faultyConn struct {
	transport.Connection
	faults *memFaults
}

func (c faultyConn) Channel(ctx context.Context) (transport.Channel, error) {
	ch, err := c.Connection.Channel(ctx)
	if err != nil {
		return nil, err
	}
	return faultyChannel{Channel: ch, faults: c.faults}, nil
}

type faultyChannel struct {
	transport.Channel
	faults *memFaults
}

func (ch faultyChannel) Consume(ctx context.Context, spec transport.ConsumeSpec) (<-chan transport.Delivery, error) {
	if ch.faults.takeConsume(spec.Queue) {
		_ = ch.Channel.Close()
		return nil, &transport.Error{Code: transport.CodePreconditionFailed, Reason: "PRECONDITION_FAILED - queue '" + spec.Queue + "' does not have a replica on the local node", Server: true}
	}
	return ch.Channel.Consume(ctx, spec)
}
