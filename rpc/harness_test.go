package rpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/rpc"
)

// TestARequestWaitsItsWholeDefaultTimeoutAndTheLateReplyIsUnmatched
// runs the default 30 s timeout against a responder that takes 45 s,
// under acemqtest: the request fails at 30 s exactly with the timeout's
// sentence, and the reply that comes 15 s later is acked, counted
// unmatched and handed to nobody.
func TestARequestWaitsItsWholeDefaultTimeoutAndTheLateReplyIsUnmatched(t *testing.T) {
	topo := acemq.NewTopology().Exchange("pricing", acemq.Direct, acemq.ExchangeOptions{})
	acemqtest.Run(t, acemqtest.Config{Topology: topo}, func(t *testing.T, h *acemqtest.Harness) {
		acemqtest.Respond(h, "pricing", "price", func(ctx context.Context, q quote) (price, error) {
			time.Sleep(45 * time.Second) // a slow responder
			return price{SKU: q.SKU, Cents: 100}, nil
		})
		r := newRequester(t, h.Conn())
		start := h.Now()
		_, err := rpc.Request[quote, price](t.Context(), r, "pricing", "price", quote{SKU: "x", N: 1})
		var te *rpc.TimeoutError
		if !errors.As(err, &te) || te.Timeout != rpc.DefaultTimeout {
			t.Fatalf("request: %v, want a timeout after rpc.DefaultTimeout", err)
		}
		if waited := h.Now().Sub(start); waited != rpc.DefaultTimeout {
			t.Fatalf("the request waited %s, want %s", waited, rpc.DefaultTimeout)
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		reply := h.Expect(t, acemqtest.Replied, 1, acemqtest.CorrelationID(te.CorrelationID))
		if at := reply[0].At.Sub(start); at != 45*time.Second {
			t.Errorf("the reply went %s after the request, want 45 s", at)
		}
		h.Expect(t, acemqtest.Acked, 1, acemqtest.Queue(r.ReplyQueue()))
		if n := r.Unmatched(); n != 1 {
			t.Errorf("unmatched %d, want the late reply", n)
		}
	})
}
