package transporttest

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func (s *suite) publishIsConfirmed(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "confirmed", nil)
	p := openPublisher(t, c)
	if !p.Confirming() {
		t.Fatal("Publisher(ctx, true) is not in confirm mode")
	}
	publishAcked(t, p, toQueue(q, "hello"))
	d := getOne(t, ch, q)
	if string(d.Body) != "hello" || d.Redelivered {
		t.Fatalf("got body %q redelivered=%v, want \"hello\" first delivery", d.Body, d.Redelivered)
	}
}

func (s *suite) mandatoryUnroutableIsReturned(t *testing.T) {
	c := s.dial(t)
	p := openPublisher(t, c)
	got := publish(t, p, &transport.Message{Exchange: "amq.direct", RoutingKey: unique("nowhere"), Mandatory: true, Body: []byte("x")})
	if got.Outcome != transport.Returned || got.ReplyCode != transport.CodeNoRoute || got.ReplyText != "NO_ROUTE" {
		t.Fatalf("got %v %d %q, want returned 312 NO_ROUTE", got.Outcome, got.ReplyCode, got.ReplyText)
	}
}

func (s *suite) nonMandatoryUnroutableIsAcked(t *testing.T) {
	c := s.dial(t)
	p := openPublisher(t, c)
	publishAcked(t, p, &transport.Message{Exchange: "amq.direct", RoutingKey: unique("nowhere"), Body: []byte("x")})
}

func (s *suite) rejectPublishFullQueueIsNacked(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "full", transport.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "first"))
	if got := publish(t, p, toQueue(q, "second")); got.Outcome != transport.Nacked {
		t.Fatalf("publish to a full reject-publish queue: %v, want nacked", got.Outcome)
	}
	m := toQueue(q, "mandatory")
	m.Mandatory = true
	if got := publish(t, p, m); got.Outcome != transport.Nacked {
		t.Fatalf("mandatory publish to a full reject-publish queue: %v, want nacked", got.Outcome)
	}
	readyEventually(t, c, q, 1)
}

func (s *suite) publishToMissingExchange(t *testing.T) {
	c := s.dial(t)
	p := openPublisher(t, c)
	x := unique("missing")
	got := make(chan transport.Confirmation, 1)
	err := p.Publish(ctx(t), &transport.Message{Exchange: x, RoutingKey: "k", Body: []byte("x")}, func(c transport.Confirmation) { got <- c })
	if err != nil && transport.Code(err) != transport.CodeNotFound {
		t.Fatalf("publish to a missing exchange returned %v; want nil or a 404", err)
	}
	select {
	case conf := <-got:
		if conf.Outcome != transport.Lost {
			t.Fatalf("publish to a missing exchange: %v, want lost", conf.Outcome)
		}
	case <-ctx(t).Done():
		t.Fatal("no answer to a publish whose channel the broker closed")
	}
	select {
	case <-p.Done():
	case <-ctx(t).Done():
		t.Fatal("channel still open after publishing to a missing exchange")
	}
}

// A content header over frame_max makes RabbitMQ close the whole
// connection; a transport refuses it before writing, and the channel, the
// connection and the publishes beside it go on.
func (s *suite) publishOverFrameMaxIsRefused(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "framemax", nil)
	p := openPublisher(t, c)
	publishAcked(t, p, toQueue(q, "before"))
	big := toQueue(q, "big")
	big.Headers = transport.Table{"x-big": strings.Repeat("b", transport.DefaultFrameMax)}
	err := p.Publish(ctx(t), big, func(transport.Confirmation) { t.Error("a refused publish was answered") })
	var le *transport.LimitError
	if !errors.Is(err, transport.ErrNotWritten) || !errors.As(err, &le) || le.Limit != transport.LimitFrameMax || le.Max != transport.DefaultFrameMax || le.Size != transport.ContentHeaderFrameSize(&big.Properties) {
		t.Fatalf("publish over frame_max returned %v, want a not-written LimitError for frame_max %d", err, transport.DefaultFrameMax)
	}
	publishAcked(t, p, toQueue(q, "after"))
	readyEventually(t, c, q, 2)
}

// AMQP 0-9-1 writes the exchange name, the routing key and the content
// type, message id and reply-to properties as short strings (at most 255
// bytes). A transport refuses a longer one before writing, saying which,
// and the publisher goes on: RabbitMQ's own client refuses it too, and
// the in-process broker is no kinder.
func (s *suite) publishOfALongShortStringIsRefused(t *testing.T) {
	c := s.dial(t)
	ch := openChannel(t, c)
	q := exclusiveQueue(t, ch, "shortstr", nil)
	p := openPublisher(t, c)
	long := strings.Repeat("i", 256)
	for _, tc := range []struct {
		name string
		msg  *transport.Message
	}{
		{"exchange", &transport.Message{Exchange: long, RoutingKey: q}},
		{"routing key", &transport.Message{RoutingKey: long}},
		{"content type", &transport.Message{RoutingKey: q, Properties: transport.Properties{ContentType: long}}},
		{"message id", &transport.Message{RoutingKey: q, Properties: transport.Properties{MessageID: long}}},
		{"correlation id", &transport.Message{RoutingKey: q, Properties: transport.Properties{CorrelationID: long}}},
		{"reply-to", &transport.Message{RoutingKey: q, Properties: transport.Properties{ReplyTo: long}}},
	} {
		tc.msg.Body = []byte(tc.name)
		err := p.Publish(ctx(t), tc.msg, func(transport.Confirmation) { t.Errorf("the refused publish with a long %s was answered", tc.name) })
		if !errors.Is(err, transport.ErrNotWritten) || !errors.Is(err, transport.ErrUnencodable) || !errors.Is(err, transport.ErrShortString) ||
			!strings.Contains(err.Error(), "the "+tc.name+" is 256 bytes") {
			t.Fatalf("publish with a 256-byte %s returned %v; want a not-written refusal matching ErrShortString that names it", tc.name, err)
		}
	}
	max := toQueue(q, "255 bytes fit")
	max.MessageID = long[:255]
	publishAcked(t, p, max)
	readyEventually(t, c, q, 1)
}
