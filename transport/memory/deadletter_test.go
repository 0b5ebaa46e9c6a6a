package memory

import (
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// dlqSetup declares DLX "dlx" (fanout) → queue "dlq" and queue "q" with args.
func dlqSetup(t *testing.T, args transport.Table) (*Broker, transport.Connection, transport.Channel) {
	t.Helper()
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "dlx", Kind: transport.Fanout, Durable: true}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "dlq", Durable: true})
	if err := ch.BindQueue(bg, transport.BindingSpec{Queue: "dlq", Exchange: "dlx"}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true, Args: args})
	return b, c, ch
}

func TestMaxLengthDropHeadDeadLettersOldest(t *testing.T) {
	b, c, ch := dlqSetup(t, transport.Table{"x-max-length": int64(2), "x-dead-letter-exchange": "dlx"})
	fill(t, c, "q", 3)
	if got := info(t, b, "q").Messages; got != 2 {
		t.Fatalf("%d ready, want 2", got)
	}
	d, ok, _ := ch.Get(bg, "dlq")
	if !ok || string(d.Body) != "0" || d.Headers["x-first-death-reason"] != "maxlen" {
		t.Fatalf("dead letter %q %v, want the oldest with reason maxlen", d.Body, d.Headers)
	}
}

func TestRepeatedDeadLetteringCountsInXDeath(t *testing.T) {
	// q dead-letters to dlx which routes back to q: a cycle with rejections
	// is allowed, and x-death counts each death.
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "back", Kind: transport.Fanout, Durable: true}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-dead-letter-exchange": "back"}})
	if err := ch.BindQueue(bg, transport.BindingSpec{Queue: "q", Exchange: "back"}); err != nil {
		t.Fatal(err)
	}
	fill(t, c, "q", 1)
	var d transport.Delivery
	for range 3 {
		var ok bool
		d, ok, _ = ch.Get(bg, "q")
		if !ok {
			t.Fatal("message lost while cycling")
		}
		if err := ch.Reject(d.DeliveryTag, false); err != nil {
			t.Fatal(err)
		}
	}
	d, _, _ = ch.Get(bg, "q")
	deaths := d.Headers["x-death"].([]any)
	death := deaths[0].(transport.Table)
	if len(deaths) != 1 || death["count"] != int64(3) || death["exchange"] != "" {
		t.Fatalf("x-death %v, want one entry counted 3", deaths)
	}
	if d.Headers["x-first-death-exchange"] != "" {
		t.Fatalf("x-first-death-exchange %v, want the original \"\"", d.Headers["x-first-death-exchange"])
	}
	_ = b
}

func TestExpiryCycleWithoutRejectionIsDropped(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "loop", Durable: true,
		Args: transport.Table{"x-message-ttl": 10, "x-dead-letter-exchange": ""}})
	fill(t, c, "loop", 1)
	eventually(t, "the cycling message to be dropped", func() bool { return info(t, b, "loop").Messages == 0 })
}

func TestUnackedMessagesDoNotExpire(t *testing.T) {
	b, _, ch := dlqSetup(t, transport.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "dlx"})
	fill(t, chConn(t, b), "q", 1)
	d, ok, _ := ch.Get(bg, "q")
	if !ok {
		t.Fatal("expired before it could be fetched")
	}
	time.Sleep(60 * time.Millisecond) // the TTL must pass while it is unacked
	if got := info(t, b, "dlq").Messages; got != 0 {
		t.Fatal("an unacked message expired")
	}
	if err := ch.Nack(d.DeliveryTag, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the requeued, already expired message to be dead-lettered", func() bool { return info(t, b, "dlq").Messages == 1 })
}

func TestExpiryUsesTimersNotPolling(t *testing.T) {
	b, c, _ := dlqSetup(t, transport.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "dlx"})
	fill(t, c, "q", 3)
	start := time.Now()
	eventually(t, "all three to expire", func() bool { return info(t, b, "dlq").Messages == 3 })
	if time.Since(start) > time.Second {
		t.Fatalf("expiry took %v", time.Since(start))
	}
}

func chConn(t *testing.T, b *Broker) transport.Connection { return dialT(t, b.Name(), nil) }

func TestZeroTTLDeliversToWaitingConsumerElseDeadLetters(t *testing.T) {
	b, c, ch := dlqSetup(t, transport.Table{"x-message-ttl": 0, "x-dead-letter-exchange": "dlx"})
	fill(t, c, "q", 1)
	eventually(t, "a zero-TTL message with no consumer to be dead-lettered", func() bool { return info(t, b, "dlq").Messages == 1 })
	ds, err := ch.Consume(bg, transport.ConsumeSpec{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, "q", 1)
	if d := recv(t, ds); string(d.Body) != "0" {
		t.Fatalf("got %q", d.Body)
	}
}
