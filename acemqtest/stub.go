package acemqtest

import (
	"context"
	"slices"
	"sync"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/transport"
)

// Stub answers the requests the service sends to another service, as
// that service would (package rpc's responder), and keeps them for the
// test to read.
type Stub[Req any] struct {
	queue string
	mu    sync.Mutex
	reqs  []Req
}

// Respond starts a stub for requests sent to exchange with routingKey: fn
// answers each one; an error from fn becomes an error reply (the
// requester's *rpc.ResponderError) and the request goes to the stub
// queue's .dlq, as package rpc's responder does. With exchange "" the
// requests go to the queue named routingKey; otherwise the exchange must
// exist (the service's topology declares what it publishes to) and the
// stub binds a queue of its own, acemqtest.stub.{exchange}.{routingKey},
// to it; the exchange must be one Config.Topology declares. The stub
// consumes on the harness's Conn, recorded like the
// service's consumers, and stops when the test ends. Respond fails the
// test if the queue cannot be declared or consumed.
func Respond[Req, Resp any](h *Harness, exchange, routingKey string, fn func(ctx context.Context, req Req) (Resp, error)) *Stub[Req] {
	h.t.Helper()
	s := &Stub[Req]{queue: routingKey}
	topo := acemq.NewTopology()
	if exchange != "" {
		s.queue = "acemqtest.stub." + exchange + "." + routingKey
		x, ok := h.exchange(exchange)
		if !ok {
			h.t.Fatalf("acemqtest: Respond binds to exchange %s, which Config.Topology does not declare; declare it there", exchange)
		}
		topo.Exchange(x.Name, x.Kind, acemq.ExchangeOptions{Transient: !x.Durable, AutoDelete: x.AutoDelete, Args: x.Args})
	}
	topo.Queue(s.queue, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(s.queue)
	if exchange != "" {
		topo.Bind(s.queue, exchange, routingKey)
	}
	ctx := context.Background()
	if err := h.conn.Apply(ctx, topo); err != nil {
		h.t.Fatalf("acemqtest: cannot declare the stub's queue %s: %v", s.queue, err)
	}
	_, err := rpc.Respond(ctx, h.conn, s.queue, func(ctx context.Context, m *acemq.Message[Req]) (Resp, error) {
		s.mu.Lock()
		s.reqs = append(s.reqs, m.Payload)
		s.mu.Unlock()
		return fn(ctx, m.Payload)
	}, acemq.ConsumerConfig{})
	if err != nil {
		h.t.Fatalf("acemqtest: cannot start the stub on %s: %v", s.queue, err)
	}
	return s
}

// exchange finds exchange name among Config.Topology's declarations.
func (h *Harness) exchange(name string) (transport.ExchangeSpec, bool) {
	if h.topo == nil {
		return transport.ExchangeSpec{}, false
	}
	for _, d := range h.topo.Declarations() {
		if d.Kind == acemq.DeclExchange && d.Exchange.Name == name {
			return d.Exchange, true
		}
	}
	return transport.ExchangeSpec{}, false
}

// Queue is the queue the stub consumes.
func (s *Stub[Req]) Queue() string { return s.queue }

// Requests returns the requests the stub has answered (or is answering),
// in the order they came.
func (s *Stub[Req]) Requests() []Req {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}
