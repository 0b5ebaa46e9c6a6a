package memory

import (
	"errors"
	"sync"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestPublishCopiesBodyAndHeaders(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	ch := chanT(t, c)
	declareT(t, ch, transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	body := []byte("original")
	h := transport.Table{"k": "v", "nested": transport.Table{"a": int32(1)}}
	m := &transport.Message{RoutingKey: "q", Body: body, Properties: transport.Properties{Headers: h}}
	if o := publishOutcome(t, p, m); o != transport.Acked {
		t.Fatal(o)
	}
	copy(body, "XXXXXXXX")
	h["k"] = "changed"
	h["nested"].(transport.Table)["a"] = int32(2)
	d, ok, err := ch.Get(bg, "q")
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if string(d.Body) != "original" || d.Headers["k"] != "v" || d.Headers["nested"].(transport.Table)["a"] != int32(1) {
		t.Fatalf("delivery changed with the caller's buffers: %q %v", d.Body, d.Headers)
	}
}

func TestConfirmsArriveInPublishOrderExactlyOnce(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true, Args: transport.Table{"x-max-length": 5, "x-overflow": "reject-publish"}})
	p := pubT(t, c)
	const n = 20
	var mu sync.Mutex
	var order []int
	var outcomes []transport.Outcome
	all := make(chan struct{})
	for i := range n {
		err := p.Publish(bg, msgTo("q", "x"), func(conf transport.Confirmation) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, i)
			outcomes = append(outcomes, conf.Outcome)
			if len(order) == n {
				close(all)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitDone(t, all)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		want := transport.Acked
		if i >= 5 {
			want = transport.Nacked
		}
		if order[i] != i || outcomes[i] != want {
			t.Fatalf("confirm %d was for publish %d with %v; want %d %v", i, order[i], outcomes[i], i, want)
		}
	}
}

func TestConcurrentPublishesAreEachConfirmedOnce(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	confirmed := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_ = p.Publish(bg, msgTo("q", "x"), func(conf transport.Confirmation) {
					mu.Lock()
					defer mu.Unlock()
					if conf.Outcome == transport.Acked {
						acked++
					}
					if acked == workers*each {
						close(confirmed)
					}
				})
			}
		}()
	}
	wg.Wait()
	waitDone(t, confirmed)
	if got := info(t, b, "q").Messages; got != workers*each {
		t.Fatalf("%d messages queued, want %d", got, workers*each)
	}
}

func TestPublishOnClosedPublisherIsNotWritten(t *testing.T) {
	_, name := newTestBroker(t)
	p := pubT(t, dialT(t, name, nil))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	err := p.Publish(bg, msgTo("q", "x"), func(transport.Confirmation) { t.Error("done called for an unwritten publish") })
	if !errors.Is(err, transport.ErrNotWritten) || !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("got %v, want ErrNotWritten and ErrClosed", err)
	}
}

func TestNonConfirmingPublisherRoutesWithoutCallbacks(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p, err := c.Publisher(bg, false)
	if err != nil || p.Confirming() {
		t.Fatalf("publisher: %v confirming=%v", err, p.Confirming())
	}
	defer p.Close()
	if err := p.Publish(bg, msgTo("q", "x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(bg, msgTo("q", "x"), func(transport.Confirmation) {}); !errors.Is(err, transport.ErrNotWritten) {
		t.Fatalf("done on a non-confirming publisher: %v, want ErrNotWritten", err)
	}
	if got := info(t, b, "q").Messages; got != 1 {
		t.Fatalf("%d messages, want 1", got)
	}
}

func TestPublishToMissingExchangeLosesPendingConfirms(t *testing.T) {
	b, name := newTestBroker(t)
	c := dialT(t, name, nil)
	declareT(t, chanT(t, c), transport.QueueSpec{Name: "q", Durable: true})
	p := pubT(t, c)
	b.StopConfirming()
	defer b.ResumeConfirming()
	pending := publishAsync(t, p, msgTo("q", "routed"))
	missing := make(chan transport.Confirmation, 1)
	err := p.Publish(bg, &transport.Message{Exchange: "nope"}, func(c transport.Confirmation) { missing <- c })
	wantCode(t, err, transport.CodeNotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'")
	for _, got := range []<-chan transport.Confirmation{pending, missing} {
		if conf := confirmation(t, got); conf.Outcome != transport.Lost || transport.Code(conf.Err) != transport.CodeNotFound {
			t.Fatalf("got %v (%v), want lost with the 404", conf.Outcome, conf.Err)
		}
	}
	waitDone(t, p.Done())
	if got := info(t, b, "q").Messages; got != 1 {
		t.Fatalf("the routed message is gone: %d ready", got)
	}
}

func TestInternalExchangeRefusesPublishes(t *testing.T) {
	_, name := newTestBroker(t)
	c := dialT(t, name, nil)
	if err := chanT(t, c).DeclareExchange(bg, transport.ExchangeSpec{Name: "in", Kind: transport.Fanout, Durable: true, Internal: true}); err != nil {
		t.Fatal(err)
	}
	err := pubT(t, c).Publish(bg, &transport.Message{Exchange: "in"}, nil)
	wantCode(t, err, transport.CodeAccessRefused, "")
}

func TestCloseFromConfirmFuncDoesNotDeadlock(t *testing.T) {
	_, name := newTestBroker(t)
	p := pubT(t, dialT(t, name, nil))
	closed := make(chan struct{})
	err := p.Publish(bg, &transport.Message{Exchange: "amq.direct", RoutingKey: "none"}, func(transport.Confirmation) {
		_ = p.Close()
		close(closed)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, closed)
	waitDone(t, p.Done())
}
