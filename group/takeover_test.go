package group

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// Two instances run a group each on one single-active-consumer queue; the
// active instance's group is closed gracefully (a deploy) in the middle:
// the other takes over, nothing is lost, and it handled nothing while the
// active one read. Order across the handover is not kept (what the test
// decided, as for package ordered: the cancel makes the waiting consumer
// active before what the closing one prefetched is handed back); it logs
// how many came late. It runs on memory:// too, which keeps single
// active consumer as RabbitMQ does.
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
	reached, proceed := make(chan struct{}), make(chan struct{})
	// The active one reads on only once the other is subscribed, so the
	// other has the whole time to show it is given nothing; from the
	// 20th handling on, every handler of the active one holds its message
	// until the other has handled one, which it can only once Close has
	// cancelled the active one's subscriptions: Close finds messages in
	// hand and the other takes over, however fast the broker is.
	subscribed, tookOver := make(chan struct{}), make(chan struct{})
	var reachedOnce, tookOverOnce sync.Once
	ga, err := Consume(context.Background(), a, q, 2, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
		add("a", m.Payload)
		select {
		case <-subscribed:
		case <-ctx.Done():
		}
		if handledA.Add(1) >= 20 {
			reachedOnce.Do(func() { close(reached) })
			<-proceed // finishes once the other took over
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := Consume(context.Background(), b, q, 2, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
		add("b", m.Payload)
		tookOverOnce.Do(func() { close(tookOver) })
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gb.Close(context.Background()) })
	close(subscribed)

	<-reached
	if n := count("b"); n != 0 {
		t.Fatalf("the waiting group handled %d messages while the active one read", n)
	}
	closed := make(chan error, 1)
	go func() { closed <- ga.Close(context.Background()) }()
	select {
	case <-tookOver:
		close(proceed)
	case <-time.After(time.Minute):
		close(proceed)
		t.Fatal("the other group never took over while the active one closed")
	}
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
		t.Fatal("the other group never took over")
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
	t.Logf("%d of %d handlings came after a later message (the graceful handover's reordering)", late, len(order))
}
