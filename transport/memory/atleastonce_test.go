package memory

import (
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// rungArgs are a replicated-layout rung's arguments: a quorum queue that
// dead-letters at least once to exchange "home" after ttl.
func rungArgs(ttl int64) transport.Table {
	return transport.Table{
		"x-queue-type": "quorum", "x-message-ttl": ttl,
		"x-dead-letter-exchange": "home", "x-dead-letter-routing-key": "src",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
	}
}

func TestAtLeastOnceKeepsAnExpiredMessageUntilItsTargetExists(t *testing.T) {
	b, name := newTestBroker(t)
	b.SetDeadLetterRetry(20 * time.Millisecond)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "home", Kind: transport.Direct, Durable: true}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: rungArgs(5)})
	fill(t, c, "rung", 1)
	// Expired, with nowhere to go: kept on the rung, neither ready nor lost.
	eventually(t, "the expired message to be retained", func() bool { return b.Retained("rung") == 1 })
	if got := info(t, b, "rung").Messages; got != 0 {
		t.Fatalf("the rung reports %d ready, want 0 (a retained dead letter is not deliverable)", got)
	}
	declareT(t, ch, transport.QueueSpec{Name: "src", Durable: true, Args: transport.Table{"x-queue-type": "quorum"}})
	if err := ch.BindQueue(bg, transport.BindingSpec{Queue: "src", Exchange: "home", RoutingKey: "src"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the retained message to reach its target", func() bool { return info(t, b, "src").Messages == 1 })
	d, ok, _ := ch.Get(bg, "src")
	if !ok || string(d.Body) != "0" || d.Headers["x-first-death-reason"] != "expired" {
		t.Fatalf("got %q %v, want the message, expired", d.Body, d.Headers)
	}
	if n := b.Retained("rung"); n != 0 {
		t.Fatalf("still %d retained after delivery", n)
	}
}

func TestAtMostOnceDropsAnExpiredMessageWithNowhereToGo(t *testing.T) {
	for name, args := range map[string]transport.Table{
		"classic": {"x-message-ttl": int64(5), "x-dead-letter-exchange": "home", "x-dead-letter-routing-key": "src"},
		// at-least-once needs reject-publish; without it RabbitMQ falls
		// back to at-most-once.
		"quorum, drop-head": {"x-queue-type": "quorum", "x-message-ttl": int64(5), "x-dead-letter-exchange": "home", "x-dead-letter-routing-key": "src", "x-dead-letter-strategy": "at-least-once"},
	} {
		t.Run(name, func(t *testing.T) {
			b, bn := newTestBroker(t)
			b.SetDeadLetterRetry(time.Millisecond)
			c := dialT(t, bn, nil)
			ch := chanT(t, c)
			if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "home", Kind: transport.Direct, Durable: true}); err != nil {
				t.Fatal(err)
			}
			declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: args})
			fill(t, c, "rung", 1)
			eventually(t, "the message to expire", func() bool { return info(t, b, "rung").Messages == 0 })
			if n := b.Retained("rung"); n != 0 {
				t.Fatalf("%d retained, want 0: this queue dead-letters at most once", n)
			}
		})
	}
}

func TestAtLeastOnceWaitsForAFullRejectPublishTarget(t *testing.T) {
	b, name := newTestBroker(t)
	b.SetDeadLetterRetry(10 * time.Millisecond)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "home", Kind: transport.Direct, Durable: true}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "src", Durable: true, Args: transport.Table{"x-queue-type": "quorum", "x-max-length": int64(1), "x-overflow": "reject-publish"}})
	if err := ch.BindQueue(bg, transport.BindingSpec{Queue: "src", Exchange: "home", RoutingKey: "src"}); err != nil {
		t.Fatal(err)
	}
	fill(t, c, "src", 1) // full
	declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: rungArgs(5)})
	fill(t, c, "rung", 1)
	eventually(t, "the refused dead letter to be retained", func() bool { return b.Retained("rung") == 1 })
	if _, ok, _ := ch.Get(bg, "src"); !ok { // room again
		t.Fatal("the target's first message is gone")
	}
	eventually(t, "the retained message to reach its target", func() bool { return b.Retained("rung") == 0 && info(t, b, "src").Messages == 1 })
}

func TestAtLeastOnceRetainedLettersGoWithTheirQueue(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	if err := ch.DeclareExchange(bg, transport.ExchangeSpec{Name: "home", Kind: transport.Direct, Durable: true}); err != nil {
		t.Fatal(err)
	}
	declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: rungArgs(5)})
	fill(t, c, "rung", 1)
	eventually(t, "the expired message to be retained", func() bool { return b.Retained("rung") == 1 })
	if _, err := ch.DeleteQueue(bg, "rung"); err != nil {
		t.Fatal(err)
	}
	if n := b.Retained("rung"); n != 0 {
		t.Fatalf("%d retained on a deleted queue", n)
	}
}

func TestDeadLetterStrategyIsComparedAndChecked(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "rung", Durable: true, Args: rungArgs(1000)})
	// RabbitMQ 3.10.8 and 4.0.5 answer the same way.
	args := rungArgs(1000)
	delete(args, "x-dead-letter-strategy")
	_, err := ch.DeclareQueue(bg, transport.QueueSpec{Name: "rung", Durable: true, Args: args})
	wantCode(t, err, transport.CodePreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-strategy' for queue 'rung' in vhost '/': received none but current is the value 'at-least-once' of type 'longstr'")
	ch = chanT(t, c)
	args["x-dead-letter-strategy"] = "sometimes"
	_, err = ch.DeclareQueue(bg, transport.QueueSpec{Name: "other", Durable: true, Args: args})
	wantCode(t, err, transport.CodePreconditionFailed, "PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue 'other' in vhost '/': invalid_dlx_strategy")
}
