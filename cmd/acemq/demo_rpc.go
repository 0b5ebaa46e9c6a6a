package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/acemq-go/acemq"
)

// requester is a minimal request/reply client (behaviour §7.3): one
// private reply queue acemq.reply.{id} (classic, exclusive, auto-delete),
// one reply consumer, and a fresh correlation id per request, written with
// the reply address as both reply_to and acemq-reply-to. It stands in for
// the rpc package, which had not been merged when the demo was written.
type requester struct {
	c       *acemq.Conn
	replyTo string
	cons    *acemq.Consumer
	mu      sync.Mutex
	waiting map[string]chan json.RawMessage
}

func newRequester(ctx context.Context, c *acemq.Conn) (*requester, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	r := &requester{c: c, replyTo: "acemq.reply." + hex.EncodeToString(b), waiting: map[string]chan json.RawMessage{}}
	if err := c.Apply(ctx, acemq.NewTopology().Queue(r.replyTo, acemq.AsClassic(), acemq.Exclusive(), acemq.AutoDelete(), acemq.NonDurable())); err != nil {
		return nil, err
	}
	cons, err := acemq.Consume(ctx, c, r.replyTo, func(_ context.Context, m *acemq.Message[json.RawMessage]) acemq.Decision {
		r.mu.Lock()
		ch := r.waiting[m.Envelope.CorrelationID]
		delete(r.waiting, m.Envelope.CorrelationID)
		r.mu.Unlock()
		if ch != nil {
			ch <- m.Payload
		} // a late or unknown reply is acked and dropped
		return acemq.Accept()
	}, acemq.WithoutDeadLetterDeclaration())
	if err != nil {
		return nil, err
	}
	r.cons = cons
	return r, nil
}

// Request sends req to queue and decodes the reply into resp. It returns
// the request's correlation id.
func (r *requester) Request(ctx context.Context, queue string, req, resp any) (string, error) {
	env := acemq.NewEnvelope()
	env.ReplyTo = r.replyTo
	ch := make(chan json.RawMessage, 1)
	r.mu.Lock()
	r.waiting[env.CorrelationID] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, env.CorrelationID)
		r.mu.Unlock()
	}()
	if _, err := r.c.Publish(ctx, "", queue, req, acemq.WithEnvelope(env), acemq.Mandatory()); err != nil {
		return env.CorrelationID, err
	}
	select {
	case b := <-ch:
		return env.CorrelationID, json.Unmarshal(b, resp)
	case <-ctx.Done():
		return env.CorrelationID, fmt.Errorf("no reply from %s (correlation %s): %w", queue, env.CorrelationID, ctx.Err())
	}
}

func (r *requester) Close(ctx context.Context) error { return r.cons.Close(ctx) }

// respond answers requests on queue with handle's result, to the address
// in acemq-reply-to (else reply_to), through the default exchange, not
// mandatory, with the request's correlation id.
func respond[Req, Resp any](ctx context.Context, c *acemq.Conn, queue string, handle func(Req) Resp) (*acemq.Consumer, error) {
	return acemq.Consume(ctx, c, queue, func(ctx context.Context, m *acemq.Message[Req]) acemq.Decision {
		to := m.Envelope.ReplyTo
		if to == "" {
			return acemq.Reject(acemq.Fatal(fmt.Errorf("request %s has no reply address", m.Envelope.ID)))
		}
		body, err := json.Marshal(handle(m.Payload))
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		env := acemq.NewEnvelope().CausedBy(m.Envelope)
		env.Type = "PriceReply"
		env.Origin = c.Origin()
		if err := c.PublishRaw(ctx, acemq.RawMessage{Exchange: "", RoutingKey: to, ContentType: "application/json",
			MessageID: env.ID, Headers: env.WireHeaders(), Body: body, NotMandatory: true, Transient: true}); err != nil {
			return acemq.Retry(err)
		}
		return acemq.Accept()
	})
}
