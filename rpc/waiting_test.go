package rpc_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/transport/memory"
)

func TestCloseFailsEveryWaitingRequestWithErrClosed(t *testing.T) {
	const n = 4
	sent := make(chan struct{}, n)
	c := connect(t, "memory://"+t.Name(), acemq.Config{OnPublish: func(p acemq.PublishReport) {
		if p.Err == nil && p.Envelope.ReplyTo != "" {
			sent <- struct{}{}
		}
	}})
	q := requestQueue(t, c, "rpc.closing") // nobody answers
	r := newRequester(t, c)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{N: i}, rpc.Timeout(time.Minute))
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		receive(t, sent) // every request is out and waits for its reply
	}
	if err := within(t, 5*time.Second, func() error { return r.Close(context.Background()) }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		err := receive(t, errs)
		if !errors.Is(err, acemq.ErrClosed) || !strings.Contains(err.Error(), "closed while request") {
			t.Fatalf("err %v, want ErrClosed saying the requester closed while it waited", err)
		}
	}
	_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{})
	if !errors.Is(err, acemq.ErrClosed) {
		t.Fatalf("request after Close: %v", err)
	}
}

func TestRequestWaitingAcrossARecoveryGetsItsAnswer(t *testing.T) {
	name := strings.ReplaceAll(t.Name(), "/", "-")
	c := connect(t, "memory://"+name, acemq.Config{WaitForRecovery: true, RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 50 * time.Millisecond})
	q := requestQueue(t, c, "rpc.across")
	first := make(chan struct{})
	var calls atomic.Int32
	respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
		if calls.Add(1) > 1 {
			return priceOf(ctx, m)
		}
		// The first delivery is in hand when the connection drops: the
		// drop ends its context, its decision is discarded, and the broker
		// delivers the request again after the recovery.
		close(first)
		select {
		case <-ctx.Done():
			return price{}, ctx.Err()
		case <-time.After(10 * time.Second):
			return price{}, errors.New("the connection drop never ended the first delivery")
		}
	})
	r := newRequester(t, c)
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		select {
		case <-first:
			memory.Lookup(name).DropConnections()
		case <-time.After(10 * time.Second):
		}
	}()
	type result struct {
		p   price
		err error
	}
	res := within(t, 15*time.Second, func() result {
		p, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "across", N: 4}, rpc.Timeout(10*time.Second))
		return result{p, err}
	})
	<-dropped
	if res.err != nil || res.p != (price{SKU: "across", Cents: 400}) {
		t.Fatalf("answer across the recovery: %+v %v", res.p, res.err)
	}
	if calls.Load() < 2 {
		t.Fatalf("the handler ran %d time(s); the drop did not land while the request waited", calls.Load())
	}
}

func TestASecondReplyWithTheSameCorrelationIsUnmatched(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		settled := make(chan acemq.Settlement, 8)
		c := connect(t, url, acemq.Config{OnSettlement: func(s acemq.Settlement) {
			if strings.HasPrefix(s.Queue, rpc.ReplyQueuePrefix) {
				settled <- s
			}
		}})
		q := requestQueue(t, c, "rpc.twice")
		respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
			// A responder that answers twice, as one redelivered after its
			// first reply went out would.
			if _, err := c.Publish(ctx, "", m.Envelope.ReplyTo, price{SKU: "first"}, acemq.SendOptions{CorrelationID: m.Envelope.CorrelationID}); err != nil {
				return price{}, err
			}
			return priceOf(ctx, m)
		})
		r := newRequester(t, c)
		got, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "second", N: 1}, rpc.Timeout(10*time.Second))
		if err != nil || got.SKU != "first" {
			t.Fatalf("answer %+v %v, want the first reply", got, err)
		}
		for i := 0; i < 2; i++ {
			if s := receive(t, settled); s.Outcome != acemq.ConsumeAcked {
				t.Fatalf("reply settled %+v", s)
			}
		}
		if r.Unmatched() != 1 {
			t.Fatalf("unmatched %d, want 1", r.Unmatched())
		}
	})
}

// The Conn under the requester closes while a request waits: the reply
// consumer is drained and no reply can come, so the caller hears it at
// once (ErrClosed), not after its timeout as "it may still be queued".
func TestConnCloseFailsAWaitingRequestAtOnce(t *testing.T) {
	sent := make(chan struct{}, 1)
	c := connect(t, "memory://"+t.Name(), acemq.Config{OnPublish: func(p acemq.PublishReport) {
		if p.Err == nil && p.Envelope.ReplyTo != "" {
			sent <- struct{}{}
		}
	}})
	q := requestQueue(t, c, "rpc.connclose") // nobody answers
	r := newRequester(t, c)
	errs := make(chan error, 1)
	go func() {
		_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{}, rpc.Timeout(time.Minute))
		errs <- err
	}()
	receive(t, sent)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, acemq.ErrClosed) || errors.Is(err, rpc.ErrRequestTimedOut) || !strings.Contains(err.Error(), "connection was closed while request") {
			t.Fatalf("err %v, want ErrClosed saying the connection closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request still waited 5s after its Conn closed (its timeout is a minute)")
	}
}
