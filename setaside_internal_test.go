package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// fakeHostRig is a memory broker connection with queue q declared and the
// given bodies published to it, in order, and a fakeHost on it.
func fakeHostRig(t *testing.T, bodies ...string) (*fakeHost, string) {
	t.Helper()
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
	defer ch.Close()
	if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	pub, err := conn.Publisher(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		confirmed := make(chan transport.Confirmation, 1)
		msg := &transport.Message{RoutingKey: "q", Body: []byte(b), Properties: transport.Properties{MessageID: b, DeliveryMode: 2}}
		if err := pub.Publish(ctx, msg, func(cf transport.Confirmation) { confirmed <- cf }); err != nil {
			t.Fatal(err)
		}
		if cf := <-confirmed; cf.Outcome != transport.Acked {
			t.Fatalf("the publish was answered %v", cf.Outcome)
		}
	}
	return &fakeHost{conn: conn}, name
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

// A retry copy the transport refuses as unwritable (here a header AMQP
// cannot carry) would be refused on every attempt: it was handed back to
// the broker (nack with requeue) and came round for ever. It is set aside
// to {q}.dlq instead, saying why, and the original is acked.
func TestARetryCopyThatCanNeverBeWrittenIsSetAsideInsteadOfHandedBack(t *testing.T) {
	host, name := fakeHostRig(t, "m1")
	host.refuse = func(msg *transport.Message) error {
		if msg.RoutingKey == "q" {
			return fmt.Errorf("memory: cannot encode the message: %w: %w: a complex128 has no AMQP field type", transport.ErrNotWritten, transport.ErrUnencodable)
		}
		return nil
	}
	cfg := defaultConfig()
	env := consumerEnv{logger: slog.New(slog.DiscardHandler), tel: newTelemetry(&cfg, "memory"), recoveryInterval: time.Millisecond, recoveryMax: time.Millisecond}
	k := newConsumerCore(host, env, "q", "tag-1", 4, 1, Fixed(3, 0), nil, time.Second, nil)
	var mu sync.Mutex
	calls := 0
	k.process = func(dv *delivery) {
		k.handle(dv, nil, func(context.Context, Envelope) (Decision, bool, time.Duration) {
			mu.Lock()
			calls++
			mu.Unlock()
			return Retry(errors.New("again")), true, 0
		})
	}
	if err := k.attach(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a copy in q.dlq", func() bool {
		host.mu.Lock()
		defer host.mu.Unlock()
		return len(host.hops) > 0
	})
	waitFor(t, "the original acked", func() bool {
		info, _ := memory.Lookup(name).QueueInfo("q")
		return info.Messages == 0 && k.unsettled() == 0
	})
	if err := drainAll(context.Background(), []*consumerCore{k}, time.Now().Add(5*time.Second), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	reason, _ := host.hops[0].Headers["x-acemq-error"].(string)
	if len(host.hops) != 1 || host.hops[0].RoutingKey != "q.dlq" || !strings.Contains(reason, "its retry copy could not be written (") || !strings.Contains(reason, "complex128") {
		t.Fatalf("hops %+v; want one copy in q.dlq saying the retry copy could not be written", host.hops)
	}
	if calls != 1 {
		t.Fatalf("the handler ran %d times, want once", calls)
	}
}

// On a stream (ConsumerConfig.OnStream) nothing can be handed back, and a
// nack is settled like an ack: a message whose copy and minimal copy were
// both refused was acked, and the reader went on past it. Now it is never
// acked: the consumer stops reading before the next message and subscribes
// again, and the message after it is handled only once it could be set
// aside.
func TestAStreamMessageThatCannotBeSetAsideIsNotAckedPast(t *testing.T) {
	host, _ := fakeHostRig(t, "bad", "good")
	var mu sync.Mutex
	refusing := true
	host.refuse = func(msg *transport.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if refusing {
			return fmt.Errorf("the broker did not confirm it: %w", transport.ErrNotWritten)
		}
		return nil
	}
	cfg := defaultConfig()
	env := consumerEnv{logger: slog.New(slog.DiscardHandler), tel: newTelemetry(&cfg, "memory"), recoveryInterval: time.Millisecond, recoveryMax: 10 * time.Millisecond}
	k := newConsumerCore(host, env, "q", "tag-1", 4, 1, NoRetry(), nil, time.Second, nil)
	k.stream = true
	var seen []string
	k.process = func(dv *delivery) {
		k.handle(dv, nil, func(context.Context, Envelope) (Decision, bool, time.Duration) {
			mu.Lock()
			seen = append(seen, string(dv.d.Body))
			n := len(seen)
			if n == 3 {
				refusing = false // the operator mends the dead-letter queues
			}
			mu.Unlock()
			if string(dv.d.Body) == "bad" {
				return Reject(errors.New("no")), true, 0
			}
			return Accept(), true, 0
		})
	}
	if err := k.attach(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message after it handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == "good"
	})
	if err := drainAll(context.Background(), []*consumerCore{k}, time.Now().Add(5*time.Second), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "bad,bad,bad,good" {
		t.Fatalf("the handler saw %v; want bad three times (twice refused, then set aside), then good", seen)
	}
	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.hops) != 1 || host.hops[0].RoutingKey != "q.dlq" {
		t.Fatalf("hops %+v; want the one copy of bad in q.dlq", host.hops)
	}
}

// On a consumer whose waits the queue holds (RabbitMQ 4.3's delayed
// retry), the attempt is x-acemq-attempt plus the broker's count of
// failed deliveries, x-delivery-count: x-acquired-count also counts the
// returns that were no failure (a drain's nack of what never started),
// which must cost no attempt.
func TestWaitsInTheQueueCountAttemptsFromFailedDeliveriesOnly(t *testing.T) {
	k := &consumerCore{waitsInQueue: true}
	dv := &delivery{d: transport.Delivery{Properties: transport.Properties{Headers: transport.Table{"x-delivery-count": int64(1), "x-acquired-count": int64(3)}}}}
	if got := k.withBrokerAttempts(dv, Envelope{Attempt: 1}).Attempt; got != 2 {
		t.Fatalf("attempt %d after one failed delivery (and two returns that were not), want 2", got)
	}
}

// A drain returns what a consumer whose waits the queue holds prefetched
// and never started with basic.nack: on RabbitMQ 4.3 a reject would count
// as a failed delivery (an attempt lost) and the queue would hold it back
// for the retry wait. Elsewhere it is a basic.reject (counted).
func TestADrainReturnsUnstartedDeliveriesUncountedWhereTheQueueHoldsWaits(t *testing.T) {
	for _, inQueue := range []bool{false, true} {
		t.Run(fmt.Sprintf("waits-in-queue-%v", inQueue), func(t *testing.T) {
			host, name := fakeHostRig(t)
			ctx := context.Background()
			ch, err := host.conn.Channel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: "qq", Durable: true, Args: transport.Table{"x-queue-type": "quorum"}}); err != nil {
				t.Fatal(err)
			}
			pub, err := host.conn.Publisher(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []string{"a", "b"} {
				done := make(chan transport.Confirmation, 1)
				if err := pub.Publish(ctx, &transport.Message{RoutingKey: "qq", Body: []byte(b)}, func(c transport.Confirmation) { done <- c }); err != nil {
					t.Fatal(err)
				}
				<-done
			}
			cfg := defaultConfig()
			env := consumerEnv{logger: slog.New(slog.DiscardHandler), tel: newTelemetry(&cfg, "memory"), recoveryInterval: time.Millisecond, recoveryMax: time.Millisecond}
			k := newConsumerCore(host, env, "qq", "tag-1", 4, 1, NoRetry(), nil, time.Second, nil)
			k.waitsInQueue = inQueue
			started := make(chan struct{}, 2)
			k.process = func(dv *delivery) {
				k.handle(dv, nil, func(ctx context.Context, _ Envelope) (Decision, bool, time.Duration) {
					started <- struct{}{}
					<-ctx.Done() // "a" is held to the drain's end
					return Accept(), true, 0
				})
			}
			if err := k.attach(ctx); err != nil {
				t.Fatal(err)
			}
			<-started
			waitFor(t, "both prefetched", func() bool { return k.inFlight.Load() == 2 })
			_ = drainAll(ctx, []*consumerCore{k}, time.Now().Add(50*time.Millisecond), 50*time.Millisecond)
			waitFor(t, "b back on qq", func() bool { info, _ := memory.Lookup(name).QueueInfo("qq"); return info.Messages >= 1 })
			d, ok, err := ch.Get(ctx, "qq")
			if err != nil || !ok {
				t.Fatalf("get: %v %v", ok, err)
			}
			_, counted := d.Headers["x-delivery-count"]
			if string(d.Body) != "b" || counted == inQueue {
				t.Fatalf("%s came back with headers %v; want x-delivery-count only where the queue holds no waits", d.Body, d.Headers)
			}
		})
	}
}
