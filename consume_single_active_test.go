package acemq_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// A SingleActive consumer's Close hands over in the queue's order, even
// when its drain runs out with a message in hand: the handler, holding
// message 5 until its context ends (as package ordered's Stop policy
// does), gives it back with Release at the drain deadline; the drain
// leaves it and the prefetched ones unsettled and closes the channel, so
// the waiting consumer receives 5 first and every later message after it,
// none twice. With a basic.cancel first (the path of every other
// consumer) the waiting one was active at once and got 15 before 5.
func TestASingleActiveConsumersCloseHandsOverInOrderPastItsDrainDeadline(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		a := brokertest.Connect(t, url)
		b := brokertest.Connect(t, url)
		q := testenv.Unique("sac.drain")
		if err := b.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, Args: transport.Table{"x-single-active-consumer": true}})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, x := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
				_, _ = b.DeleteQueue(context.Background(), x)
			}
		})
		const total = 30
		for i := range total {
			if _, err := b.Publish(context.Background(), "", q, i, acemq.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var byA, byB []int
		held := make(chan struct{})
		ka, err := acemq.Consume(context.Background(), a, q, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
			mu.Lock()
			byA = append(byA, m.Payload)
			mu.Unlock()
			if m.Payload == 5 {
				close(held)
				<-ctx.Done() // the drain deadline
				return acemq.Release()
			}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 10, SingleActive: true, DrainTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		kb, err := acemq.Consume(context.Background(), b, q, func(ctx context.Context, m *acemq.Message[int]) acemq.Decision {
			mu.Lock()
			byB = append(byB, m.Payload)
			mu.Unlock()
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 10, SingleActive: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kb.Close(context.Background()) })
		<-held
		brokertest.Eventually(t, "the active consumer prefetches past the message it holds", func() bool { return ka.InFlight() >= 2 })
		if err := ka.Close(context.Background()); err != nil {
			t.Fatalf("Close with the handler letting go at the deadline: %v", err)
		}
		brokertest.Eventually(t, "the waiting consumer handles the rest", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(byB) > 0 && byB[len(byB)-1] == total-1
		})
		mu.Lock()
		defer mu.Unlock()
		if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(byA, want) {
			t.Errorf("the closing consumer handled %v, want %v (nothing started once Close began)", byA, want)
		}
		var want []int
		for i := 5; i < total; i++ {
			want = append(want, i)
		}
		if !slices.Equal(byB, want) {
			t.Errorf("the consumer that took over handled %v, want %v: the message in hand first, then the rest in order", byB, want)
		}
	})
}
