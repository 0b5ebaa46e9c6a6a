package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

type blockEvents struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newBlockEvents() *blockEvents { return &blockEvents{ch: make(chan struct{}, 16)} }

func (e *blockEvents) on(active bool, reason string) {
	e.mu.Lock()
	if active {
		e.got = append(e.got, "blocked:"+reason)
	} else {
		e.got = append(e.got, "unblocked:"+reason)
	}
	e.mu.Unlock()
	e.ch <- struct{}{}
}

func (e *blockEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

func TestBlockTellsOnlyAPublishingConnectionAndHoldsUntilUnblock(t *testing.T) {
	b, name := newTestBroker(t)
	ev := newBlockEvents()
	c := dialT(t, name, ev.on)
	idle := newBlockEvents()
	dialT(t, name, idle.on)
	consumer := newBlockEvents()
	sub := chanT(t, dialT(t, name, consumer.on))
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	fill(t, c, "q", 1)
	p := pubT(t, c)

	b.Block("low on memory")
	late := newBlockEvents()
	dialT(t, name, late.on)
	if l := ev.list(); len(l) != 0 {
		t.Fatalf("OnBlocked calls %v before the connection published; RabbitMQ tells nobody when the alarm is raised", l)
	}
	d, ok, err := sub.Get(bg, "q")
	if err != nil || !ok {
		t.Fatalf("a consume-only connection must carry on during the alarm: %v, %v", ok, err)
	}
	if err := sub.Ack(d.DeliveryTag); err != nil {
		t.Fatal(err)
	}
	first := publishAsync(t, p, msgTo("q", "held 1"))
	if l := ev.list(); len(l) != 1 || l[0] != "blocked:low on memory" {
		t.Fatalf("OnBlocked calls %v once Publish returned, want the block with its reason", l)
	}
	second := publishAsync(t, p, msgTo("q", "held 2"))
	noConfirmation(t, first)
	if n := info(t, b, "q").Messages; n != 0 {
		t.Fatalf("a held publish was routed: %d ready", n)
	}
	if l := ev.list(); len(l) != 1 {
		t.Fatalf("OnBlocked calls %v, want one per alarm", l)
	}
	b.Unblock()
	for i, got := range []<-chan transport.Confirmation{first, second} {
		if conf := confirmation(t, got); conf.Outcome != transport.Acked {
			t.Fatalf("held publish %d: %v", i+1, conf.Outcome)
		}
	}
	if l := ev.list(); len(l) != 2 || l[1] != "unblocked:" {
		t.Fatalf("OnBlocked calls %v, want the block then the unblock", l)
	}
	for who, e := range map[string]*blockEvents{"an idle connection": idle, "a consume-only connection": consumer, "a connection opened during the alarm": late} {
		if l := e.list(); len(l) != 0 {
			t.Fatalf("%s that never published saw %v", who, l)
		}
	}
	for _, want := range []string{"held 1", "held 2"} {
		d, ok, err := sub.Get(bg, "q")
		if err != nil || !ok || string(d.Body) != want {
			t.Fatalf("got %q (%v, %v), want %q: held publishes are routed in order", d.Body, ok, err, want)
		}
	}
}

func TestBlockTellsAPublishingConnectionAgainInTheNextAlarm(t *testing.T) {
	b, name := newTestBroker(t)
	ev := newBlockEvents()
	p := pubT(t, dialT(t, name, ev.on))
	for _, reason := range []string{"low on memory", "low on disk"} {
		b.Block(reason)
		got := publishAsync(t, p, msgTo("q", "x"))
		b.Unblock()
		confirmation(t, got)
	}
	want := []string{"blocked:low on memory", "unblocked:", "blocked:low on disk", "unblocked:"}
	if l := ev.list(); fmt.Sprint(l) != fmt.Sprint(want) {
		t.Fatalf("OnBlocked calls %v, want %v", l, want)
	}
}

func TestHeldPublishesEndLostWhenChannelCloses(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	p := pubT(t, c)
	b.Block("disk")
	defer b.Unblock()
	got := publishAsync(t, p, msgTo("q", "held"))
	_ = p.Close()
	if conf := confirmation(t, got); conf.Outcome != transport.Lost {
		t.Fatalf("%v, want lost", conf.Outcome)
	}
}

func TestDropConnectionsForcesCloseLosesConfirmsAndRequeues(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true})
	declareT(t, ch, transport.QueueSpec{Name: "excl", Exclusive: true})
	fill(t, c, "q", 1)
	if _, ok, _ := ch.Get(bg, "q"); !ok {
		t.Fatal("no message")
	}
	p := pubT(t, c)
	b.StopConfirming()
	defer b.ResumeConfirming()
	pending := publishAsync(t, p, msgTo("q", "pending"))

	b.DropConnections()
	want := "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"
	waitDone(t, c.Done())
	e := wantCode(t, c.Err(), transport.CodeConnectionForced, want)
	if !e.Connection {
		t.Fatal("320 not marked as a connection error")
	}
	waitDone(t, ch.Done())
	wantCode(t, ch.Err(), transport.CodeConnectionForced, want)
	if conf := confirmation(t, pending); conf.Outcome != transport.Lost || transport.Code(conf.Err) != transport.CodeConnectionForced {
		t.Fatalf("pending confirm %v (%v), want lost with the 320", conf.Outcome, conf.Err)
	}
	if b.Connections() != 0 {
		t.Fatalf("%d connections after drop", b.Connections())
	}
	if _, ok := b.QueueInfo("excl"); ok {
		t.Fatal("exclusive queue survived its connection")
	}
	if n := info(t, b, "q").Messages; n != 2 {
		t.Fatalf("%d ready, want the requeued one and the routed pending one", n)
	}
	g := chanT(t, dialT(t, name, nil))
	if d, _, _ := g.Get(bg, "q"); !d.Redelivered {
		t.Fatal("requeued message not marked redelivered")
	}
	if _, err := c.Channel(bg); err == nil {
		t.Fatal("opened a channel on a dropped connection")
	}
}

func TestNackNextNacksWithoutRouting(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	b.NackNext(2)
	for i, want := range []transport.Outcome{transport.Nacked, transport.Nacked, transport.Acked} {
		if o := publishOutcome(t, p, msgTo("q", "x")); o != want {
			t.Fatalf("publish %d: %v, want %v", i, o, want)
		}
	}
	if n := info(t, b, "q").Messages; n != 1 {
		t.Fatalf("%d ready, want only the acked one", n)
	}
}

func TestStopConfirmingRoutesButWithholdsConfirms(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	b.StopConfirming()
	first := publishAsync(t, p, msgTo("q", "1"))
	second := publishAsync(t, p, &transport.Message{Exchange: "amq.direct", RoutingKey: "none", Mandatory: true})
	noConfirmation(t, first)
	if n := info(t, b, "q").Messages; n != 1 {
		t.Fatalf("%d ready; publishes must still be routed", n)
	}
	b.ResumeConfirming()
	if o := confirmation(t, first).Outcome; o != transport.Acked {
		t.Fatal(o)
	}
	if conf := confirmation(t, second); conf.Outcome != transport.Returned || conf.ReplyCode != 312 {
		t.Fatalf("%+v, want the withheld return", conf)
	}
}

func TestBlockedPublishingConnectionStallsItsAcksUntilUnblock(t *testing.T) {
	b, name := newTestBroker(t)
	pubConn := dialT(t, name, nil)
	subConn := dialT(t, name, nil)
	declareT(t, chanT(t, subConn), transport.QueueSpec{Name: "q", Durable: true})
	fill(t, subConn, "q", 2)
	mixed := chanT(t, pubConn)
	consumeOnly := chanT(t, subConn)
	d1, _, _ := mixed.Get(bg, "q")
	d2, _, _ := consumeOnly.Get(bg, "q")

	b.Block("low on memory")
	defer b.Unblock()
	got := publishAsync(t, pubT(t, pubConn), msgTo("q", "held"))
	if err := mixed.Nack(d1.DeliveryTag, true); err != nil {
		t.Fatal(err)
	}
	if err := consumeOnly.Nack(d2.DeliveryTag, true); err != nil {
		t.Fatal(err)
	}
	if n := info(t, b, "q").Messages; n != 1 {
		t.Fatalf("%d ready: the consume-only connection's nack must apply and the stalled one's must wait", n)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if _, err := mixed.DeclareQueue(ctx, transport.QueueSpec{Name: "q", Passive: true}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("declaration on a stalled connection: %v, want it to wait for its context", err)
	}
	b.Unblock()
	confirmation(t, got)
	if n := info(t, b, "q").Messages; n != 3 {
		t.Fatalf("%d ready after unblock, want 3", n)
	}
}
