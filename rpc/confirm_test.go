package rpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/transport/memory"
)

// A broker slow to confirm: the request is routed and answered while its
// publish still waits for the confirm. The caller stops waiting only after
// the reply was taken off the reply queue; the answer is in hand and is
// what Request returns, not the publish's failure.
func TestAReplyThatArrivesBeforeItsRequestIsConfirmedIsReturned(t *testing.T) {
	name := strings.ReplaceAll(t.Name(), "/", "-")
	replied := make(chan struct{}, 4)
	c := connect(t, "memory://"+name, acemq.Config{OnSettlement: func(s acemq.Settlement) {
		if strings.HasPrefix(s.Queue, rpc.ReplyQueuePrefix) {
			replied <- struct{}{}
		}
	}})
	q := requestQueue(t, c, "rpc.unconfirmed")
	respond(t, c, q, priceOf)
	r := newRequester(t, c)
	b := memory.Lookup(name)
	b.StopConfirming()
	t.Cleanup(b.ResumeConfirming) // before the Conn's Close, which waits for outstanding confirms
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-replied: // the reply consumer has matched the reply
			cancel()
		case <-ctx.Done():
		}
	}()
	type result struct {
		p   price
		err error
	}
	res := within(t, 15*time.Second, func() result {
		p, err := rpc.Request[quote, price](ctx, r, "", q, quote{SKU: "early", N: 2}, rpc.Timeout(10*time.Second))
		return result{p, err}
	})
	if res.err != nil || res.p != (price{SKU: "early", Cents: 200}) {
		t.Fatalf("got %+v %v, want the answer that arrived before the caller stopped waiting", res.p, res.err)
	}
	if r.Unmatched() != 0 {
		t.Fatalf("unmatched %d, want 0", r.Unmatched())
	}
}

// The request's timeout passes while its publish waits for the broker's
// confirm. The message may well be on the queue: that is a timed-out
// request (ErrRequestTimedOut, "it may still be queued"), as when the
// timeout passes while waiting for the reply.
func TestARequestWhoseConfirmOutlivesItsTimeoutTimesOut(t *testing.T) {
	name := strings.ReplaceAll(t.Name(), "/", "-")
	c := connect(t, "memory://"+name)
	q := requestQueue(t, c, "rpc.slowconfirm")
	r := newRequester(t, c)
	b := memory.Lookup(name)
	b.StopConfirming()
	t.Cleanup(b.ResumeConfirming)
	_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{}, rpc.Timeout(100*time.Millisecond))
	var te *rpc.TimeoutError
	if !errors.Is(err, rpc.ErrRequestTimedOut) || !errors.As(err, &te) || te.ID == "" || te.Timeout != 100*time.Millisecond {
		t.Fatalf("err %v, want a *TimeoutError for the request", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v matches context.DeadlineExceeded, but ctx had no deadline", err)
	}
}
