package memory

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// recorder keeps what Watch tells, as text.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) on(e Event) {
	var line string
	switch e.Kind {
	case EventPublished:
		line = fmt.Sprintf("%d published %q/%q body=%s", e.Seq, e.Exchange, e.RoutingKey, e.Body)
	case EventRouted:
		line = fmt.Sprintf("%d routed -> %v nacked=%v", e.Seq, e.Queues, e.Nacked)
	case EventSettled:
		line = fmt.Sprintf("settled %s %s body=%s", e.Queue, e.Reason, e.Body)
	case EventDeadLettered:
		line = fmt.Sprintf("dead-lettered %s (%s) -> %q %v body=%s", e.Queue, e.Reason, e.Exchange, e.Queues, e.Body)
	}
	r.mu.Lock()
	r.got = append(r.got, line)
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func TestWatchTellsPublishesSettlementsAndDeadLettersInOrder(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "dlq", Durable: true})
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}})
	declareT(t, ch, transport.QueueSpec{Name: "short", Durable: true, Args: transport.Table{"x-message-ttl": int64(1)}})
	var r recorder
	stop := b.Watch(r.on)
	p := pubT(t, c)
	for _, body := range []string{"a", "b"} {
		if o := publishOutcome(t, p, msgTo("q", body)); o != transport.Acked {
			t.Fatalf("publish %s: %v", body, o)
		}
	}
	if o := publishOutcome(t, p, &transport.Message{RoutingKey: "nowhere", Body: []byte("c"), Mandatory: true}); o != transport.Returned {
		t.Fatalf("unroutable publish: %v", o)
	}
	b.NackNext(1)
	if o := publishOutcome(t, p, msgTo("q", "d")); o != transport.Nacked {
		t.Fatalf("nacked publish: %v", o)
	}
	d1, _, _ := ch.Get(bg, "q")
	d2, _, _ := ch.Get(bg, "q")
	if err := ch.Ack(d1.DeliveryTag); err != nil {
		t.Fatal(err)
	}
	if err := ch.Reject(d2.DeliveryTag, false); err != nil {
		t.Fatal(err)
	}
	if o := publishOutcome(t, p, msgTo("short", "e")); o != transport.Acked {
		t.Fatalf("publish e: %v", o)
	}
	eventually(t, "the expiry on short", func() bool { return len(r.lines()) == 14 })
	stop()
	stop()
	publishOutcome(t, p, msgTo("q", "after stop"))
	want := []string{
		`1 published ""/"q" body=a`,
		`1 routed -> [q] nacked=false`,
		`2 published ""/"q" body=b`,
		`2 routed -> [q] nacked=false`,
		`3 published ""/"nowhere" body=c`,
		`3 routed -> [] nacked=false`,
		`4 published ""/"q" body=d`,
		`4 routed -> [] nacked=true`,
		`settled q ack body=a`,
		`dead-lettered q (rejected) -> "" [dlq] body=b`,
		`settled q reject body=b`,
		`5 published ""/"short" body=e`,
	}
	// The expiry timer and the publish's routing report race only in
	// real time; each must be there once.
	last := []string{`5 routed -> [short] nacked=false`, `dead-lettered short (expired) -> "" [] body=e`}
	got := r.lines()
	tail := slices.Clone(got[min(12, len(got)):])
	slices.Sort(tail)
	slices.Sort(last)
	if len(got) != 14 || !slices.Equal(got[:12], want) || !slices.Equal(tail, last) {
		t.Fatalf("events\n got %q\nwant %q and then, in either order, %q", got, want, last)
	}
}

func TestSnapshotCountsReadyUnackedCreditHeldAndWithheld(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true})
	declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: transport.Table{"x-message-ttl": int64(60000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "q"}})
	p := pubT(t, c)
	for i := range 3 {
		publishOutcome(t, p, msgTo("q", fmt.Sprint(i)))
	}
	publishOutcome(t, p, msgTo("rung", "later"))
	sub := chanT(t, dialT(t, name, nil))
	if err := sub.Qos(1); err != nil {
		t.Fatal(err)
	}
	ds, err := sub.Consume(bg, transport.ConsumeSpec{Queue: "q", Tag: "t"})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ds)
	pulled, ok, err := ch.Get(bg, "q")
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	b.StopConfirming()
	withheld := publishAsync(t, p, msgTo("rung", "withheld"))
	s := b.Snapshot()
	if s.Withheld != 1 || s.Held != 0 || s.Blocked || s.Connections != 2 {
		t.Fatalf("snapshot %+v: want 1 withheld, none held, 2 connections", s)
	}
	byName := map[string]QueueState{}
	for _, q := range s.Queues {
		byName[q.Name] = q
	}
	if q := byName["q"]; q.Ready != 1 || q.Unacked != 2 || q.Consumers != 1 || q.Credit != 0 || q.Expires {
		t.Fatalf("q: %+v, want 1 ready, 2 unacked (one delivered, one pulled), 1 consumer without credit", q)
	}
	if r := byName["rung"]; r.Ready != 2 || !r.Expires || r.TTL != time.Minute || r.DeadLetterExchange != "" || !r.HasDeadLetterExchange {
		t.Fatalf("rung: %+v", r)
	}
	b.ResumeConfirming()
	confirmation(t, withheld)
	if err := ch.Ack(pulled.DeliveryTag); err != nil {
		t.Fatal(err)
	}
	_ = sub.Close()
	eventually(t, "the closed subscription's delivery back", func() bool {
		for _, q := range b.Snapshot().Queues {
			if q.Name == "q" {
				return q.Unacked == 0 && q.Ready == 2 && q.Consumers == 0
			}
		}
		return false
	})
	b.Block("disk")
	publishAsync(t, p, msgTo("q", "held"))
	if s := b.Snapshot(); s.Held != 1 || !s.Blocked {
		t.Fatalf("blocked snapshot %+v: want 1 held", s)
	}
	b.Unblock()
}

func TestDropConnectionsAtPublishLosesThatPublishUnrouted(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	b.DropConnectionsAtPublish(2)
	if o := publishOutcome(t, p, msgTo("q", "1")); o != transport.Acked {
		t.Fatalf("first publish: %v", o)
	}
	if o := publishOutcome(t, p, msgTo("q", "2")); o != transport.Lost {
		t.Fatalf("second publish: %v, want Lost", o)
	}
	waitDone(t, c.Done())
	if n := info(t, b, "q").Messages; n != 1 {
		t.Fatalf("q holds %d, want only the first: the second was never routed", n)
	}
	c2 := dialT(t, name, nil)
	if o := publishOutcome(t, pubT(t, c2), msgTo("q", "3")); o != transport.Acked {
		t.Fatalf("a publish after the drop: %v; the drop is spent", o)
	}
}

func TestDropConnectionsAfterPublishRoutesItAndLosesTheConfirm(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	b.DropConnectionsAfterPublish(1)
	if o := publishOutcome(t, p, msgTo("q", "1")); o != transport.Lost {
		t.Fatalf("publish: %v, want Lost", o)
	}
	waitDone(t, c.Done())
	if n := info(t, b, "q").Messages; n != 1 {
		t.Fatalf("q holds %d, want the message: it was routed before the loss", n)
	}
	if o := b.dropAt.Load(); o != 0 {
		t.Fatalf("the drop is still armed (%d)", o)
	}
}

func TestDropConnectionsAtPublishDisarmedByZero(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	b.DropConnectionsAtPublish(1)
	b.DropConnectionsAtPublish(0)
	if o := publishOutcome(t, pubT(t, c), msgTo("q", "1")); o != transport.Acked {
		t.Fatalf("publish: %v", o)
	}
}
