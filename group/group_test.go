package group

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// blocking is a handler whose calls wait for release; started counts the
// calls that began.
type blocking struct {
	started atomic.Int32
	release chan struct{}
	once    sync.Once
}

func newBlocking() *blocking { return &blocking{release: make(chan struct{})} }

func (b *blocking) handle(ctx context.Context, m *acemq.Message[json.RawMessage]) acemq.Decision {
	b.started.Add(1)
	<-b.release
	return acemq.Accept()
}

func (b *blocking) open() { b.once.Do(func() { close(b.release) }) }

func TestMembersAreTaggedAndEachHasItsOwnPrefetch(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "group")
		h := newBlocking()
		defer h.open()
		g, err := Consume(context.Background(), c, q, 3, h.handle, acemq.ConsumerConfig{Prefetch: 1, Tag: "ignored"})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close(context.Background())
		for i, k := range g.Members() {
			if want := "acemq-" + q + "-" + string(rune('1'+i)); k.Tag() != want {
				t.Errorf("member %d tag %q, want %q", i+1, k.Tag(), want)
			}
		}
		if g.Size() != 3 || g.Queue() != q {
			t.Fatalf("Size %d Queue %q", g.Size(), g.Queue())
		}
		brokertest.Eventually(t, "three subscriptions", func() bool { return brokertest.Consumers(t, c, q) == 3 })
		// Prefetch 1 per member: three messages run at once only if each
		// member has a window of its own; the fourth waits in the queue.
		brokertest.Publish(t, c, q, 4)
		brokertest.Eventually(t, "three handlers running", func() bool { return h.started.Load() == 3 })
		if got := brokertest.Depth(t, c, q); got != 1 {
			t.Fatalf("%d ready messages with 3 members of prefetch 1 busy, want 1", got)
		}
		h.open()
		brokertest.Eventually(t, "the queue drained", func() bool { return h.started.Load() == 4 && g.InFlight() == 0 })
		if err := g.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if brokertest.Consumers(t, c, q) != 0 {
			t.Fatal("members still subscribed after Close")
		}
	})
}

func TestSizeBelowOneIsAConfigurationError(t *testing.T) {
	c := brokertest.Connect(t, "memory://group-size")
	q := brokertest.Queue(t, c, "group")
	_, err := Consume(context.Background(), c, q, 0, newBlocking().handle, acemq.ConsumerConfig{})
	var ce *acemq.ConfigurationError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "at least 1 member") {
		t.Fatalf("size 0: %v", err)
	}
	if brokertest.Consumers(t, c, q) != 0 {
		t.Fatal("a refused group subscribed")
	}
}

func TestAFailedStartClosesTheStartedMembersAndSaysWhich(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "group")
		h := newBlocking()
		defer h.open()
		boom := errors.New("boom")
		_, err := start(context.Background(), q, 4, func(ctx context.Context, i int) (*acemq.Consumer, error) {
			if i == 3 {
				return nil, boom
			}
			return acemq.Consume(ctx, c, q, h.handle, acemq.ConsumerConfig{Tag: Tag(q, i)})
		})
		if want := `acemq: cannot start consumer 3 of 4 on "` + q + `": boom`; err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
		if !errors.Is(err, boom) {
			t.Fatal("the member's error is not reachable with errors.Is")
		}
		if n := brokertest.Consumers(t, c, q); n != 0 {
			t.Fatalf("%d members left subscribed after a failed start", n)
		}
	})
}

func TestAGroupOnAMissingQueueSaysWhichMemberAndWhatToDo(t *testing.T) {
	c := brokertest.Connect(t, "memory://group-missing")
	_, err := Consume(context.Background(), c, "absent", 2, newBlocking().handle, acemq.ConsumerConfig{})
	var se *StartError
	if !errors.As(err, &se) || se.Member != 1 {
		t.Fatalf("error %v, want a StartError for member 1", err)
	}
	if want := `acemq: cannot start consumer 1 of 2 on "absent": the queue does not exist; declare it first`; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start %q", err, want)
	}
}

// A sequential Close would wait for member 1's running handler before
// cancelling member 2's subscription; one deadline spent once means every
// member stops taking deliveries at the same time.
func TestCloseDrainsEveryMemberAtOnce(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "group")
		h := newBlocking()
		defer h.open()
		g, err := Consume(context.Background(), c, q, 3, h.handle, acemq.ConsumerConfig{Prefetch: 1})
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Publish(t, c, q, 3)
		brokertest.Eventually(t, "three handlers running", func() bool { return h.started.Load() == 3 })
		done := make(chan error, 1)
		go func() { done <- g.Close(context.Background()) }()
		brokertest.Eventually(t, "every member cancelled while its handler still runs", func() bool { return brokertest.Consumers(t, c, q) == 0 })
		if g.InFlight() != 3 {
			t.Fatalf("%d handlers running, want the 3 still held", g.InFlight())
		}
		h.open()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := g.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if d := brokertest.Depth(t, c, q); d != 0 {
			t.Fatalf("%d messages back in the queue after a drain that finished", d)
		}
	})
}

func TestStalledIsNilWhileEveryMemberReads(t *testing.T) {
	c := brokertest.Connect(t, "memory://group-stalled")
	q := brokertest.Queue(t, c, "group")
	g, err := Consume(context.Background(), c, q, 2, newBlocking().handle, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(context.Background())
	if err := g.Stalled(); err != nil {
		t.Fatal(err)
	}
}
