package transporttest

import (
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// deadLetterPair declares a DLX (direct) with a DLQ bound under key and
// returns the exchange and queue names.
func deadLetterPair(t *testing.T, c transport.Connection, ch transport.Channel, key string) (string, string) {
	t.Helper()
	dlx := tempExchange(t, c, ch, transport.Direct)
	dlq := exclusiveQueue(t, ch, "dlq", nil)
	bind(t, ch, dlq, dlx, key, nil)
	return dlx, dlq
}

// firstDeath returns the newest x-death entry of d.
func firstDeath(t *testing.T, d transport.Delivery) transport.Table {
	t.Helper()
	deaths, ok := d.Headers["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		t.Fatalf("dead-lettered message has no x-death header: %v", d.Headers)
	}
	death, ok := deaths[0].(transport.Table)
	if !ok {
		t.Fatalf("x-death[0] is %T, want a table", deaths[0])
	}
	return death
}

func (s *suite) ttlExpiryDeadLetters(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	dlx, dlq := deadLetterPair(t, c, ch, "expired-key")
	q := exclusiveQueue(t, ch, "ttl", transport.Table{
		"x-message-ttl":             int32(50),
		"x-dead-letter-exchange":    dlx,
		"x-dead-letter-routing-key": "expired-key",
	})
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "short-lived"))
	d := getOne(t, ch, dlq)
	if string(d.Body) != "short-lived" || d.RoutingKey != "expired-key" || d.Exchange != dlx {
		t.Fatalf("dead letter %q via %q/%q, want \"short-lived\" via %q/expired-key", d.Body, d.Exchange, d.RoutingKey, dlx)
	}
	death := firstDeath(t, d)
	if death["reason"] != "expired" || death["queue"] != q {
		t.Fatalf("x-death %v, want reason expired from %s", death, q)
	}
	if err := ch.Ack(d.DeliveryTag); err != nil {
		t.Fatalf("ack: %v", err)
	}
	readyEventually(t, c, q, 0)
}

func (s *suite) rejectDeadLetters(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := unique("rejecting")
	dlx, dlq := deadLetterPair(t, c, ch, q) // no x-dead-letter-routing-key: the original key
	if _, err := ch.DeclareQueue(ctx(t), transport.QueueSpec{Name: q, Exclusive: true,
		Args: transport.Table{"x-dead-letter-exchange": dlx}}); err != nil {
		t.Fatalf("declare: %v", err)
	}
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "bad"))
	d := getOne(t, ch, q)
	if err := ch.Reject(d.DeliveryTag, false); err != nil {
		t.Fatalf("reject: %v", err)
	}
	dead := getOne(t, ch, dlq)
	if string(dead.Body) != "bad" || dead.RoutingKey != q {
		t.Fatalf("dead letter %q with key %q, want \"bad\" with the original key %q", dead.Body, dead.RoutingKey, q)
	}
	death := firstDeath(t, dead)
	if death["reason"] != "rejected" || death["queue"] != q || death["exchange"] != "" {
		t.Fatalf("x-death %v, want reason rejected, queue %s, exchange \"\"", death, q)
	}
	if n, _ := death["count"].(int64); n != 1 {
		t.Fatalf("x-death count %v (%T), want int64 1", death["count"], death["count"])
	}
	if dead.Headers["x-first-death-reason"] != "rejected" || dead.Headers["x-first-death-queue"] != q {
		t.Fatalf("x-first-death headers %v", dead.Headers)
	}
	if err := ch.Ack(dead.DeliveryTag); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// x-death and x-first-death-* belong to the broker: a message published
// with them (forged, or copied from a dead letter it republishes) has no
// death record of its own on RabbitMQ 4 and memory://, so dead-lettering
// writes only its own death, counted from 1. RabbitMQ 3.x counts on from a
// published x-death and keeps its x-first-death-* (Harness.KeepsPublishedDeaths).
// Measured on 3.10.8 and 4.3.6.
func (s *suite) publishedDeathHeadersAreNotTheBrokersRecord(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	dlq := exclusiveQueue(t, ch, "deaths-dlq", nil)
	q := exclusiveQueue(t, ch, "deaths", transport.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	p := openPublisher(t, c)
	forged := toQueue(q, "m")
	forged.Headers = transport.Table{
		"x-death":                []any{transport.Table{"queue": "forged", "reason": "rejected", "count": int64(4), "exchange": "", "routing-keys": []any{"forged"}}},
		"x-first-death-reason":   "forged",
		"x-first-death-queue":    "forged",
		"x-first-death-exchange": "forged",
	}
	publishAcked(t, p, forged)
	deadOnce := func() transport.Delivery {
		t.Helper()
		d := getOne(t, ch, q)
		if err := ch.Reject(d.DeliveryTag, false); err != nil {
			t.Fatalf("reject: %v", err)
		}
		dead := getOne(t, ch, dlq)
		if err := ch.Ack(dead.DeliveryTag); err != nil {
			t.Fatalf("ack: %v", err)
		}
		return dead
	}
	dead := deadOnce()
	deaths, _ := dead.Headers["x-death"].([]any)
	first := dead.Headers["x-first-death-reason"]
	if s.h.KeepsPublishedDeaths {
		if len(deaths) != 2 || first != "forged" {
			t.Fatalf("published with a forged x-death, dead-lettered: %d x-death entries, x-first-death-reason %v; want 2 and the forged one", len(deaths), first)
		}
	} else if death := firstDeath(t, dead); len(deaths) != 1 || death["queue"] != q || first != "rejected" || dead.Headers["x-first-death-queue"] != q {
		t.Fatalf("published with a forged x-death, dead-lettered: x-death %v, x-first-death-reason %v; want only the death in %s, first", deaths, first, q)
	}
	// The dead letter republished as it came, and dead-lettered again.
	again := toQueue(q, "m")
	again.Headers = dead.Headers
	publishAcked(t, p, again)
	death := firstDeath(t, deadOnce())
	want := int64(1)
	if s.h.KeepsPublishedDeaths {
		want = 2
	}
	if n, _ := death["count"].(int64); death["queue"] != q || n != want {
		t.Fatalf("a dead letter republished with its headers and dead-lettered again: x-death[0] %v, want queue %s counted %d", death, q, want)
	}
}
