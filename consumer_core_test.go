package acemq

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// fakeHost is a consumerHost without a Conn: channels come straight from
// an in-process broker connection, hops and reports are recorded.
type fakeHost struct {
	conn transport.Connection
	// refuse, when set, answers each hop first: a non-nil error refuses
	// it (and it is not recorded).
	refuse func(msg *transport.Message) error

	mu       sync.Mutex
	hops     []transport.Message
	settles  []Settlement
	leftCore *consumerCore
}

func (h *fakeHost) channel(ctx context.Context) (transport.Channel, error) {
	return h.conn.Channel(ctx)
}

func (h *fakeHost) hop(_ context.Context, msg *transport.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse != nil {
		if err := h.refuse(msg); err != nil {
			return err
		}
	}
	h.hops = append(h.hops, *msg)
	return nil
}

func (h *fakeHost) connection() (uint64, bool) { return 1, true }

func (h *fakeHost) settled(s Settlement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settles = append(h.settles, s)
}

func (h *fakeHost) fellBack(Fallback) {}

func (h *fakeHost) deadLettering(string) bool { return false }

func (h *fakeHost) left(k *consumerCore) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leftCore = k
}

// TestConsumerCoreRunsAgainstAFakeHost: a consumer reaches its Conn only
// through consumerHost, so it runs without one. A rejected delivery is
// reported to the host, set aside through the host's hop with the reason,
// and acked on its channel; the drain tells the host it left.
func TestConsumerCoreRunsAgainstAFakeHost(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("fake-host-%d", time.Now().UnixNano())
	t.Cleanup(func() { memory.Delete(name) })
	drv, _ := transport.Lookup("memory")
	conn, _, err := drv.Dial(ctx, transport.Config{URL: "memory://" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	pub, err := conn.Publisher(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := make(chan transport.Confirmation, 1)
	msg := &transport.Message{RoutingKey: "q", Body: []byte("x"), Properties: transport.Properties{MessageID: "m1", DeliveryMode: 2}}
	if err := pub.Publish(ctx, msg, func(cf transport.Confirmation) { confirmed <- cf }); err != nil {
		t.Fatal(err)
	}
	if cf := <-confirmed; cf.Outcome != transport.Acked {
		t.Fatalf("the publish was answered %v", cf.Outcome)
	}

	cfg := defaultConfig()
	host := &fakeHost{conn: conn}
	env := consumerEnv{logger: slog.New(slog.DiscardHandler), tel: newTelemetry(&cfg, "memory"), recoveryInterval: time.Millisecond, recoveryMax: time.Millisecond}
	k := newConsumerCore(host, env, "q", "tag-1", 4, 1, cfg.retry, nil, time.Second, nil)
	k.process = func(dv *delivery) {
		k.handle(dv, nil, func(context.Context, Envelope) (Decision, bool, time.Duration) {
			return Reject(fmt.Errorf("bad order")), true, 0
		})
	}
	if err := k.attach(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for k.unsettled() != 0 || len(host.settlements()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the delivery was not settled within 10s")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	if err := drainAll(ctx, []*consumerCore{k}, time.Now().Add(5*time.Second), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.settles) != 1 || host.settles[0].Outcome != ConsumeRejected || host.settles[0].Target != "q.dlq" {
		t.Fatalf("settlements reported to the host: %+v", host.settles)
	}
	if len(host.hops) != 1 || host.hops[0].RoutingKey != "q.dlq" || string(host.hops[0].Body) != "x" {
		t.Fatalf("hops made through the host: %+v", host.hops)
	}
	if got := host.hops[0].Properties.Headers["x-acemq-error"]; got != "the handler rejected it: bad order" {
		t.Fatalf("the set-aside copy's reason is %v", got)
	}
	if host.leftCore != k {
		t.Fatal("the drain did not tell the host the consumer left")
	}
	info, ok := memory.Lookup(name).QueueInfo("q")
	if !ok || info.Messages != 0 {
		t.Fatalf("the original was not acked: %+v", info)
	}
}

func (h *fakeHost) settlements() []Settlement {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Settlement(nil), h.settles...)
}
