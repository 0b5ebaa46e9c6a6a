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
