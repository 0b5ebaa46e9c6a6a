package transporttest

import (
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// routedTo publishes one message per key through x and returns, per
// queue, the bodies that arrived (each queue drained with Get).
func (s *suite) routeAndCollect(t *testing.T, c transport.Connection, ch transport.Channel, x string, msgs []*transport.Message, queues []string, want map[string][]string) {
	t.Helper()
	p := openPublisher(t, c)
	for _, m := range msgs {
		m.Exchange = x
		publishAcked(t, p, m)
	}
	for _, q := range queues {
		readyEventually(t, c, q, len(want[q]))
		for _, body := range want[q] {
			d, ok, err := ch.Get(ctx(t), q)
			if err != nil || !ok {
				t.Fatalf("get %s: ok=%v err=%v", q, ok, err)
			}
			if string(d.Body) != body {
				t.Fatalf("queue %s got %q, want %q (all wanted: %v)", q, d.Body, body, want[q])
			}
			if err := ch.Ack(d.DeliveryTag); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
}

func msg(key, body string) *transport.Message {
	return &transport.Message{RoutingKey: key, Body: []byte(body)}
}

func (s *suite) topicWildcards(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	x := tempExchange(t, c, ch, transport.Topic)
	star := exclusiveQueue(t, ch, "star", nil)
	hash := exclusiveQueue(t, ch, "hash", nil)
	mid := exclusiveQueue(t, ch, "mid", nil)
	bind(t, ch, star, x, "order.*", nil)
	bind(t, ch, hash, x, "order.#", nil)
	bind(t, ch, mid, x, "*.paid.#", nil)
	s.routeAndCollect(t, c, ch, x,
		[]*transport.Message{msg("order", "bare"), msg("order.paid", "paid"), msg("order.paid.eu", "paid-eu"), msg("refund.paid", "refund")},
		[]string{star, hash, mid},
		map[string][]string{
			star: {"paid"},
			hash: {"bare", "paid", "paid-eu"},
			mid:  {"paid", "paid-eu", "refund"},
		})
}

func (s *suite) fanoutRouting(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	x := tempExchange(t, c, ch, transport.Fanout)
	a := exclusiveQueue(t, ch, "fan-a", nil)
	b := exclusiveQueue(t, ch, "fan-b", nil)
	bind(t, ch, a, x, "", nil)
	bind(t, ch, b, x, "ignored", nil)
	s.routeAndCollect(t, c, ch, x,
		[]*transport.Message{msg("any", "one"), msg("", "two")},
		[]string{a, b},
		map[string][]string{a: {"one", "two"}, b: {"one", "two"}})
}

func (s *suite) headersRouting(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	x := tempExchange(t, c, ch, transport.Headers)
	all := exclusiveQueue(t, ch, "hdr-all", nil)
	anyq := exclusiveQueue(t, ch, "hdr-any", nil)
	bind(t, ch, all, x, "", transport.Table{"x-match": "all", "type": "order", "region": "eu"})
	bind(t, ch, anyq, x, "", transport.Table{"x-match": "any", "type": "order", "region": "eu"})
	with := func(body string, h transport.Table) *transport.Message {
		m := msg("", body)
		m.Headers = h
		return m
	}
	s.routeAndCollect(t, c, ch, x,
		[]*transport.Message{
			with("both", transport.Table{"type": "order", "region": "eu"}),
			with("one", transport.Table{"type": "order", "region": "us"}),
			with("neither", transport.Table{"type": "refund"}),
		},
		[]string{all, anyq},
		map[string][]string{all: {"both"}, anyq: {"both", "one"}})
}
