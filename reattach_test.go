package acemq

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport/memory"
)

// After a lost connection, a consumer the broker refuses on its own
// channel (here 406, as a stream without a replica on the node yet) is
// left to its re-subscriber: the recovery completes at its first attempt,
// the other consumer and publishing work at once, and the refused one
// reads again when the broker lets it. Before, the refusal ended every
// recovery attempt until the broker stopped refusing (seen in the
// partition drill's node logs: a stream reader refused on a node just
// restarted after a partition took its whole client down again).
func TestARefusedReattachDoesNotHoldUpTheRecovery(t *testing.T) {
	const name = "reattach-refused"
	f := injectFaults(t, name)

	recovered := make(chan int, 4)
	c, err := Connect(context.Background(), "faulty+memory://"+name, Config{
		Logger:           slog.New(slog.DiscardHandler),
		RecoveryInterval: 5 * time.Millisecond,
		OnEvent: func(e Event) {
			if e.Kind == EventRecovered {
				recovered <- e.Attempt
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := context.Background()
	if err := c.Apply(ctx, NewTopology().Queue("healthy", QueueOptions{Type: Classic}).Queue("refused", QueueOptions{Type: Classic})); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	for _, q := range []string{"healthy", "refused"} {
		k, err := Consume(ctx, c, q, func(_ context.Context, m *Message[string]) Decision {
			got <- q + ":" + m.Payload
			return Accept()
		}, ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
	}

	// The broker refuses the next consumes on "refused" (the recovery's
	// and the re-subscriber's first ones), then lets it in.
	const refuse = 3
	f.refuseConsumes("refused", refuse)
	memory.Lookup(name).DropConnections()

	select {
	case n := <-recovered:
		if n != 1 {
			t.Fatalf("recovered at attempt %d; a consumer's refusal held up the recovery (want attempt 1)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no recovery within 10s")
	}
	send := func(q, v string) {
		t.Helper()
		if _, err := NewPublisher[string](c, "", q, PublisherConfig{}).Send(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(want string) {
		t.Helper()
		limit := time.After(10 * time.Second)
		for {
			select {
			case v := <-got:
				if v == want {
					return
				}
			case <-limit:
				t.Fatalf("%s was not consumed within 10s (refusals so far: %d)", want, f.refused.Load())
			}
		}
	}
	send("healthy", "after")
	wait("healthy:after")
	send("refused", "after")
	wait("refused:after")
	if n := f.refused.Load(); n != refuse {
		t.Fatalf("%d consumes refused, want all %d (the re-subscriber tried until the broker let it in)", n, refuse)
	}
	if st := c.Health(ctx).Stalled; slices.Contains(st, "refused") {
		t.Fatalf("still reported stalled after reading again: %v", st)
	}
}
