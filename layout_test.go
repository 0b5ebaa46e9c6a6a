package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

var replicated = acemq.Config{Layout: acemq.ReplicatedLayout}

// noLimitArgs is what the replicated layout writes for "no delivery limit"
// on the engine's broker: x-delivery-limit -1 on RabbitMQ 4 and memory://,
// nothing on RabbitMQ 3 (where -1 is a limit every return exceeds).
func noLimitArgs(t *testing.T, e *engine) transport.Table {
	t.Helper()
	args := transport.Table{"x-queue-type": "quorum"}
	if e.name == "memory" || testenv.RabbitMajor(t) >= 4 {
		args["x-delivery-limit"] = int64(-1)
	}
	return args
}

// redeclare declares q with args on a fresh raw channel: nil when the
// broker holds q exactly so (RabbitMQ compares the type and every argument
// it knows), a 406 otherwise.
func redeclare(t *testing.T, c *acemq.Conn, q string, args transport.Table) error {
	t.Helper()
	ch, err := c.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.DeclareQueue(context.Background(), transport.QueueSpec{Name: q, Durable: true, Args: args})
	return err
}

func deleteAfter(t *testing.T, c *acemq.Conn, queues ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		for _, q := range queues {
			_, _ = c.DeleteQueue(ctx, q)
		}
	})
}

func TestReplicatedLayoutDeclaresTheLibrarysQueuesAsQuorumQueues(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		src := e.unique("layout.src")
		policy := acemq.Fixed(2, 2*time.Second).WaitInBrokerFrom(time.Second)
		rung := acemq.RetryQueue(src, 2*time.Second)
		deleteAfter(t, e.c, src, src+".dlq", src+".parked", rung)
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(src, acemq.QueueOptions{})); err != nil {
			t.Fatal(err)
		}
		k, err := acemq.Consume(ctx, e.c, src, func(context.Context, *acemq.Message[string]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{Retry: policy})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(ctx)
		holding := noLimitArgs(t, e)
		for _, q := range []string{src + ".dlq", src + ".parked"} {
			if err := redeclare(t, e.c, q, nil); transport.Code(err) != transport.CodePreconditionFailed {
				t.Errorf("%s declared classic: %v, want 406 (the replicated layout made it a quorum queue)", q, err)
			}
			if err := redeclare(t, e.c, q, holding); err != nil {
				t.Errorf("%s declared with %v: %v, want it to match", q, holding, err)
			}
		}
		rungArgs := transport.Table{"x-queue-type": "quorum", "x-message-ttl": int64(2000),
			"x-dead-letter-exchange": acemq.RetryExchange, "x-dead-letter-routing-key": src,
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
		if err := redeclare(t, e.c, rung, rungArgs); err != nil {
			t.Errorf("%s declared with %v: %v, want it to match", rung, rungArgs, err)
		}
		decls, err := e.c.LayoutDeclarations(ctx, src, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(decls) != 3 || decls[0].QueueType != acemq.Quorum || decls[2].Queue.Args["x-dead-letter-strategy"] != "at-least-once" {
			t.Errorf("LayoutDeclarations = %v", decls)
		}
	}, replicated)
}

func TestClassicLayoutStaysTheDefault(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		src := e.unique("layout.classic")
		rung := acemq.RetryQueue(src, 2*time.Second)
		deleteAfter(t, e.c, src, src+".dlq", src+".parked", rung)
		if e.c.Config().Layout != acemq.ClassicLayout {
			t.Fatalf("Config().Layout = %q, want classic", e.c.Config().Layout)
		}
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(src, acemq.QueueOptions{})); err != nil {
			t.Fatal(err)
		}
		k, err := acemq.Consume(ctx, e.c, src, func(context.Context, *acemq.Message[string]) acemq.Decision { return acemq.Accept() },
			acemq.ConsumerConfig{Retry: acemq.Fixed(2, 2*time.Second).WaitInBrokerFrom(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close(ctx)
		if err := redeclare(t, e.c, src+".dlq", nil); err != nil {
			t.Errorf("the classic .dlq: %v", err)
		}
		exactlyThree := transport.Table{"x-message-ttl": int64(2000), "x-dead-letter-exchange": acemq.RetryExchange, "x-dead-letter-routing-key": src}
		if err := redeclare(t, e.c, rung, exactlyThree); err != nil {
			t.Errorf("the classic rung: %v", err)
		}
	})
}

// TestReplicatedLayoutCarriesEveryPathOfASetAside sends messages through a
// broker-held retry wait and then to each end: handled, {q}.dlq, {q}.parked.
func TestReplicatedLayoutCarriesEveryPathOfASetAside(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		src := e.unique("layout.path")
		rung := acemq.RetryQueue(src, time.Second)
		deleteAfter(t, e.c, src, src+".dlq", src+".parked", rung)
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(src, acemq.QueueOptions{}).DeadLetters(src)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		handled := map[string]int{}
		done := make(chan struct{}, 3)
		k, err := acemq.Consume(ctx, e.c, src, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
			if m.Envelope.Attempt == 1 {
				return acemq.Retry(errors.New("wait in the broker"))
			}
			mu.Lock()
			handled[m.Payload]++
			mu.Unlock()
			done <- struct{}{}
			switch m.Payload {
			case "reject":
				return acemq.Reject(errors.New("to the dlq"))
			case "park":
				return acemq.Park(errors.New("for a person"))
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Retry: acemq.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		p := acemq.NewPublisher[string](e.c, "", src, acemq.PublisherConfig{})
		for _, s := range []string{"accept", "reject", "park"} {
			if _, err := p.Send(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("handled after the wait: %v", handled)
			}
		}
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for q, want := range map[string]int{src + ".dlq": 1, src + ".parked": 1, rung: 0} {
			info, err := e.c.QueueInfo(ctx, q)
			if err != nil || info.Messages != want {
				t.Errorf("%s holds %d (%v), want %d", q, info.Messages, err, want)
			}
		}
		if err := redeclare(t, e.c, src+".dlq", noLimitArgs(t, e)); err != nil {
			t.Errorf("the .dlq is not the replicated layout's: %v", err)
		}
	}, replicated)
}

func TestPlanSaysWhoIsRefusedWhenTheBrokerHoldsTheOtherLayout(t *testing.T) {
	for _, tc := range []struct {
		name       string
		live, plan acemq.Layout
		want       []string
	}{
		{"replicated over a live classic layout", acemq.ClassicLayout, acemq.ReplicatedLayout, []string{"406 PRECONDITION_FAILED", "acemq dlq migrate", "not replicated"}},
		{"classic over a live replicated layout", acemq.ReplicatedLayout, acemq.ClassicLayout, []string{"406 PRECONDITION_FAILED", "Java", "acemq.ReplicatedLayout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onEveryTransport(t, func(t *testing.T, e *engine) {
				ctx := context.Background()
				src := e.unique("layout.plan")
				deleteAfter(t, e.c, src, src+".dlq", src+".parked")
				topo := acemq.NewTopology().Queue(src, acemq.QueueOptions{}).DeadLetters(src)
				live, _ := e.another(t, acemq.Config{Layout: tc.live})
				if err := live.Apply(ctx, topo); err != nil {
					t.Fatal(err)
				}
				planner, _ := e.another(t, acemq.Config{Layout: tc.plan})
				plan, err := planner.Plan(ctx, topo)
				if err != nil {
					t.Fatal(err)
				}
				differs := 0
				for _, it := range plan.Items {
					name := it.Declaration.Queue.Name
					if it.Declaration.Kind != acemq.DeclQueue || (name != src+".dlq" && name != src+".parked") {
						if it.Status == acemq.Differs {
							t.Errorf("%s differs: %s", it.Declaration, it.Detail)
						}
						continue
					}
					differs++
					if it.Status != acemq.Differs || !strings.Contains(it.Detail, "x-queue-type") {
						t.Errorf("%s: %s %q, want differs on x-queue-type", name, it.Status, it.Detail)
					}
					for _, w := range tc.want {
						if !strings.Contains(it.Warning, w) {
							t.Errorf("%s: warning %q does not say %q", name, it.Warning, w)
						}
					}
				}
				if differs != 2 {
					t.Errorf("plan:\n%s", plan)
				}
				if !strings.Contains(plan.String(), "warning: ") {
					t.Errorf("plan.String() shows no warning:\n%s", plan)
				}
			})
		})
	}
}

func TestAConsumerUsesTheLibraryQueueItFindsInTheOtherLayout(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		src := e.unique("layout.tolerate")
		deleteAfter(t, e.c, src, src+".dlq", src+".parked")
		if err := e.c.Apply(ctx, acemq.NewTopology().Queue(src, acemq.QueueOptions{})); err != nil {
			t.Fatal(err)
		}
		// A classic-layout consumer (the family's) made the classic queues.
		old, err := acemq.Consume(ctx, e.c, src, func(context.Context, *acemq.Message[string]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Close(ctx); err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		c, _ := e.another(t, acemq.Config{Layout: acemq.ReplicatedLayout, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		rejected := make(chan struct{}, 1)
		k, err := acemq.Consume(ctx, c, src, func(context.Context, *acemq.Message[string]) acemq.Decision {
			rejected <- struct{}{}
			return acemq.Reject(errors.New("to the classic dlq"))
		}, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatalf("a replicated-layout consumer on a broker holding the classic layout: %v", err)
		}
		if _, err := acemq.NewPublisher[string](c, "", src, acemq.PublisherConfig{}).Send(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		<-rejected
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err := c.QueueInfo(ctx, src+".dlq"); err != nil || info.Messages != 1 {
			t.Errorf("%s.dlq holds %d (%v), want the rejected message", src, info.Messages, err)
		}
		if err := redeclare(t, c, src+".dlq", nil); err != nil {
			t.Errorf("the .dlq is no longer classic: %v", err)
		}
		text := logs.String()
		if n := strings.Count(text, src+".dlq is on the broker, but not as this Conn's replicated layout declares it"); n != 1 {
			t.Errorf("the mismatch is told %d times, want once:\n%s", n, text)
		}
		if !strings.Contains(text, "acemq dlq migrate") {
			t.Errorf("the warning does not say how to move it:\n%s", text)
		}
	})
}

func TestAnUnknownLayoutIsRefusedBeforeDialling(t *testing.T) {
	_, err := acemq.Connect(context.Background(), "memory://layout-unknown", acemq.Config{Layout: "mirrored"})
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || ce.Option != "Config.Layout" || !strings.Contains(err.Error(), "acemq.ReplicatedLayout") {
		t.Fatalf("Connect with Layout \"mirrored\": %v", err)
	}
}
