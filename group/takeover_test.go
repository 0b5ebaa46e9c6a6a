package group

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// Two instances run a group each on one single-active-consumer queue
// (acemq.ConsumerConfig.SingleActive); the active instance's group is
// closed gracefully (a deploy) in the middle: the other takes over,
// nothing is lost, it handled nothing while the active one read, and no
// message is handled after a later one (issue 43: the members end by
// closing their channels, with no cancel, so the broker returns what the
// closing group held, in order, before it activates the other; a cancel
// first had 9 to 19 of 60 handlings come late). It runs on memory://
// too, which keeps single active consumer as RabbitMQ does.
func TestAGracefulCloseOfTheActiveGroupHandsOverAndLosesNothing(t *testing.T) {
	brokertest.ForEachBroker(t, gracefulGroupHandover)
}

func gracefulGroupHandover(t *testing.T, url string) {
	a := brokertest.Connect(t, url)
	b := brokertest.Connect(t, url)
	q := testenv.Unique("group.sac")
	if err := b.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, Args: transport.Table{"x-single-active-consumer": true}})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = b.DeleteQueue(context.Background(), x)
		}
	})
	const total = 60
	for i := range total {
		if _, err := b.Publish(context.Background(), "", q, i, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var log []string
	var order []int
	add := func(who string, n int) {
		mu.Lock()
		log = append(log, who)
		order = append(order, n)
		mu.Unlock()
	}
	count := func(who string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, w := range log {
			if w == who {
				n++
			}
		}
		return n
	}
	var handledA atomic.Int32
	reached, closing := make(chan struct{}), make(chan struct{})
	// The active one reads on only once the other is subscribed, so the
	// other has the whole time to show it is given nothing; from the
	// 20th handling on, every handler of the active one holds its message
	// until Close has begun its drain, so Close finds messages in hand
	// and prefetched, however fast the broker is.
	subscribed := make(chan struct{})
	var reachedOnce sync.Once
	cfg := acemq.ConsumerConfig{Prefetch: 10, SingleActive: true}
	ga, err := Consume(context.Background(), a, q, 2, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
		add("a", m.Payload)
		select {
		case <-subscribed:
		case <-ctx.Done():
		}
		if handledA.Add(1) >= 20 {
			reachedOnce.Do(func() { close(reached) })
			select {
			case <-closing:
			case <-ctx.Done():
			}
		}
		return acemq.Accept()
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := Consume(context.Background(), b, q, 2, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
		add("b", m.Payload)
		return acemq.Accept()
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gb.Close(context.Background()) })
	close(subscribed)

	<-reached
	if n := count("b"); n != 0 {
		t.Fatalf("the waiting group handled %d messages while the active one read", n)
	}
	// The active member holds one message in hand and has more
	// prefetched; none is settled while the handler holds, so the count
	// falls to the one in hand only when Close's drain lets go of the
	// prefetched ones. Only then do the handlers return, so none starts
	// another and the drain finds prefetched messages.
	brokertest.Eventually(t, "the active group prefetches past the message in hand", func() bool { return ga.InFlight() >= 2 })
	closed := make(chan error, 1)
	go func() { closed <- ga.Close(context.Background()) }()
	brokertest.Eventually(t, "the active group's Close begins its drain", func() bool { return ga.InFlight() <= 1 })
	close(closing)
	if err := <-closed; err != nil {
		t.Fatalf("the active group's graceful close: %v", err)
	}
	brokertest.Eventually(t, "the other group handles the rest", func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[int]bool{}
		for _, n := range order {
			seen[n] = true
		}
		return len(seen) == total
	})
	if count("b") == 0 {
		t.Fatalf("the other group never took over: %v %v", log, order)
	}
	mu.Lock()
	defer mu.Unlock()
	late, top := 0, -1
	for _, n := range order {
		if n < top {
			late++
		}
		top = max(top, n)
	}
	if late != 0 {
		t.Errorf("%d of %d handlings came after a later message: the graceful handover did not keep the queue's order", late, len(order))
	}
}
