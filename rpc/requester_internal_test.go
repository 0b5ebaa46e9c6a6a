package rpc

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// internalRequester is a Requester on a private in-memory broker, closed
// with its Conn at the end of the test.
func internalRequester(t *testing.T) *Requester {
	t.Helper()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://"+strings.ReplaceAll(t.Name(), "/", "-"), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	r, err := NewRequester(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// register puts corr in pending as Request does before publishing.
func register(r *Requester, corr string) chan reply {
	ch := make(chan reply, 1)
	r.mu.Lock()
	r.pending[corr] = ch
	r.mu.Unlock()
	return ch
}

// abandonWithin runs r.abandon and fails the test if it has not returned
// within 5s.
func abandonWithin(t *testing.T, r *Requester, corr string, ch chan reply) (reply, bool) {
	t.Helper()
	type result struct {
		rep reply
		ok  bool
	}
	done := make(chan result, 1)
	go func() {
		rep, ok := r.abandon(corr, ch)
		done <- result{rep, ok}
	}()
	select {
	case res := <-done:
		return res.rep, res.ok
	case <-time.After(5 * time.Second):
		t.Fatal("abandon did not return within 5s")
	}
	return reply{}, false
}

func noPending(t *testing.T, r *Requester) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) != 0 {
		t.Fatalf("pending %v after abandon", r.pending)
	}
}

// A request's wait ends (deadline or cancellation) and, before the caller
// forgets its correlation, the reply consumer matches the reply and
// acknowledges it. The reply is the caller's, not dropped uncounted.
func TestAReplyMatchedAsTheWaitEndsIsHandedToTheCaller(t *testing.T) {
	r := internalRequester(t)
	ch := register(r, "corr-1")
	m := &acemq.Message[reply]{Envelope: acemq.Envelope{ID: "reply-1", CorrelationID: "corr-1"}, Payload: reply{body: []byte(`{"n":1}`)}}
	if d := r.onReply(context.Background(), m); d.String() != "accept" {
		t.Fatalf("reply decision %s", d)
	}
	rep, ok := abandonWithin(t, r, "corr-1", ch)
	if !ok || rep.closed || string(rep.body) != `{"n":1}` {
		t.Fatalf("abandon gave %+v %v, want the matched reply", rep, ok)
	}
	if got := r.Unmatched(); got != 0 {
		t.Fatalf("unmatched %d, want 0", got)
	}
	noPending(t, r)
}

func TestAbandonedRequestWithoutAReplyLeavesNothing(t *testing.T) {
	r := internalRequester(t)
	ch := register(r, "corr-1")
	if rep, ok := abandonWithin(t, r, "corr-1", ch); ok {
		t.Fatalf("abandon gave %+v with no reply", rep)
	}
	noPending(t, r)
	// A reply coming now is late: unmatched.
	m := &acemq.Message[reply]{Envelope: acemq.Envelope{ID: "reply-1", CorrelationID: "corr-1"}}
	r.onReply(context.Background(), m)
	if got := r.Unmatched(); got != 1 || len(ch) != 0 {
		t.Fatalf("unmatched %d (want 1), %d in the abandoned channel", got, len(ch))
	}
}

// Close fails the waiting requests before their waits notice; abandon
// hands over the closed marker.
func TestAbandonAfterCloseHandsOverTheClosedMarker(t *testing.T) {
	r := internalRequester(t)
	ch := register(r, "corr-1")
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep, ok := abandonWithin(t, r, "corr-1", ch); !ok || !rep.closed {
		t.Fatalf("abandon gave %+v %v, want the closed marker", rep, ok)
	}
}
