package memory

import (
	"fmt"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func fill(t *testing.T, c transport.Connection, q string, n int) {
	t.Helper()
	p := pubT(t, c)
	for i := range n {
		if o := publishOutcome(t, p, msgTo(q, fmt.Sprint(i))); o != transport.Acked {
			t.Fatal(o)
		}
	}
}

func TestRoundRobinAcrossConsumers(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	ch := chanT(t, c)
	a, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q", Tag: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q", Tag: "b"})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, "q", 6)
	for i := 0; i < 6; i += 2 {
		da, db := recv(t, a), recv(t, b)
		if string(da.Body) != fmt.Sprint(i) || string(db.Body) != fmt.Sprint(i+1) || da.ConsumerTag != "a" || db.ConsumerTag != "b" {
			t.Fatalf("round %d: a got %q, b got %q", i/2, da.Body, db.Body)
		}
	}
}

func TestDeliveryTagsArePerChannelFromOne(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	fill(t, c, "q", 4)
	for range 2 {
		ch := chanT(t, c)
		for want := uint64(1); want <= 2; want++ {
			d, ok, err := ch.Get(bg, "q")
			if !ok || err != nil || d.DeliveryTag != want {
				t.Fatalf("tag %d (%v %v), want %d", d.DeliveryTag, ok, err, want)
			}
		}
	}
}

func TestUnlimitedPrefetchDeliversEverything(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	fill(t, c, "q", 300)
	ds, err := chanT(t, c).Consume(bg, transport.ConsumeSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		recv(t, ds)
	}
	if got := info(t, b, "q").Messages; got != 0 {
		t.Fatalf("%d ready with prefetch 0", got)
	}
}

func TestExclusiveConsumerRefusesOthers(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	if _, err := chanT(t, c).Consume(bg, transport.ConsumeSpec{Queue: "q", Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	ch := chanT(t, c)
	_, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q"})
	wantCode(t, err, transport.CodeAccessRefused, "ACCESS_REFUSED - queue 'q' in vhost '/' in exclusive use")
	waitDone(t, ch.Done())
}

func TestConsumeMissingQueueIs404(t *testing.T) {
	_, name := newTestBroker(t)
	ch := chanT(t, dialT(t, name, nil))
	_, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "nope"})
	wantCode(t, err, transport.CodeNotFound, "NOT_FOUND - no queue 'nope' in vhost '/'")
	waitDone(t, ch.Done())
}

func TestAutoDeleteQueueGoesWithLastConsumer(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "ad", Durable: true, AutoDelete: true})
	ch := chanT(t, c)
	for _, tag := range []string{"a", "b"} {
		if _, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "ad", Tag: tag}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Cancel(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if info(t, b, "ad").Consumers != 1 {
		t.Fatal("consumer count after one cancel")
	}
	if err := ch.Cancel(bg, "b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.QueueInfo("ad"); ok {
		t.Fatal("auto-delete queue survived its last consumer")
	}
}

func TestChannelCloseClosesDeliveriesAndRequeuesInOrder(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	fill(t, c, "q", 5)
	ch := chanT(t, c)
	if err := ch.Qos(2); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	// Both prefetched deliveries are taken before the close, so exactly
	// the first two come back redelivered (taking one only left the second
	// racing the close: a flake under load).
	recv(t, ds)
	recv(t, ds)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	closedSoon(t, ds)
	if got := info(t, b, "q"); got.Messages != 5 || got.Consumers != 0 {
		t.Fatalf("after close: %+v, want 5 ready, 0 consumers", got)
	}
	g := chanT(t, c)
	for i := range 5 {
		d, _, _ := g.Get(bg, "q")
		if string(d.Body) != fmt.Sprint(i) || d.Redelivered != (i < 2) {
			t.Fatalf("message %d: %q redelivered=%v", i, d.Body, d.Redelivered)
		}
	}
	if err := ch.Ack(1); err == nil {
		t.Fatal("ack on a closed channel succeeded")
	}
}

func TestConsumerTagReuseClosesConnection(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	ch := chanT(t, c)
	if _, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q", Tag: "t"}); err != nil {
		t.Fatal(err)
	}
	_, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q", Tag: "t"})
	wantCode(t, err, 530, "")
	waitDone(t, c.Done())
}

// A quorum queue counts as RabbitMQ 4.3 does: x-acquired-count every
// earlier delivery, x-delivery-count only the returns that count as
// failures (basic.reject with requeue, not basic.nack).
func TestQuorumRedeliveryCountsAsRabbitMQ43Does(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "qq", Durable: true, Args: transport.Table{"x-queue-type": "quorum"}})
	fill(t, c, "qq", 1)
	ch := chanT(t, c)
	for i, want := range []struct {
		acquired, delivery any
		nack               bool
	}{{nil, nil, true}, {int64(1), nil, false}, {int64(2), int64(1), true}, {int64(3), int64(1), false}} {
		d, ok, err := ch.Get(bg, "qq")
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		if d.Headers["x-acquired-count"] != want.acquired || d.Headers["x-delivery-count"] != want.delivery {
			t.Fatalf("delivery %d: x-acquired-count %v, x-delivery-count %v; want %v, %v", i+1, d.Headers["x-acquired-count"], d.Headers["x-delivery-count"], want.acquired, want.delivery)
		}
		settle := ch.Reject
		if want.nack {
			settle = ch.Nack
		}
		if err := settle(d.DeliveryTag, true); err != nil {
			t.Fatal(err)
		}
	}
}

// A quorum queue declared without x-delivery-limit has RabbitMQ 4's
// default of 20: the 21st counted return dead-letters the message (here
// dropped: no dead-letter exchange). x-delivery-limit -1 means none.
func TestQuorumDefaultDeliveryLimitIsTwentyCountedReturns(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	setup := chanT(t, c)
	declareT(t, setup, transport.QueueSpec{Name: "qq", Durable: true, Args: transport.Table{"x-queue-type": "quorum"}})
	declareT(t, setup, transport.QueueSpec{Name: "unlimited", Durable: true, Args: transport.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}})
	fill(t, c, "qq", 1)
	fill(t, c, "unlimited", 1)
	ch := chanT(t, c)
	for _, q := range []string{"qq", "unlimited"} {
		n := 0
		for ; n < 30; n++ {
			d, ok, err := ch.Get(bg, q)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if err := ch.Reject(d.DeliveryTag, true); err != nil {
				t.Fatal(err)
			}
		}
		if want := map[string]int{"qq": 21, "unlimited": 30}[q]; n != want {
			t.Fatalf("%s offered the message %d times, want %d", q, n, want)
		}
	}
}

func TestQosRefusesNegativePrefetch(t *testing.T) {
	_, name := newTestBroker(t)
	if err := chanT(t, dialT(t, name, nil)).Qos(-1); err == nil {
		t.Fatal("Qos(-1) accepted")
	}
}
