package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/rpc"
	"github.com/acemq-go/acemq/transport/memory"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

type quote struct {
	SKU string `json:"sku"`
	N   int    `json:"n"`
}

type price struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

func newRequester(t *testing.T, c *acemq.Conn, opts ...rpc.Option) *rpc.Requester {
	t.Helper()
	r, err := rpc.NewRequester(context.Background(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func respond[Req, Resp any](t *testing.T, c *acemq.Conn, q string, h rpc.HandlerFunc[Req, Resp], opts ...acemq.ConsumerConfig) {
	t.Helper()
	k, err := rpc.Respond(context.Background(), c, q, h, brokertest.First(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
}

func priceOf(_ context.Context, m *acemq.Message[quote]) (price, error) {
	return price{SKU: m.Payload.SKU, Cents: 100 * m.Payload.N}, nil
}

func TestRequestGetsTheResponderAnswer(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := requestQueue(t, c, "rpc.quotes")
		var seen acemq.Envelope
		respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
			seen = m.Envelope
			return priceOf(ctx, m)
		})
		r := newRequester(t, c)
		got, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "a-1", N: 3},
			rpc.WithSendOptions(acemq.SendOptions{CorrelationID: "caller-chosen"}))
		if err != nil {
			t.Fatal(err)
		}
		if got != (price{SKU: "a-1", Cents: 300}) {
			t.Fatalf("reply %+v", got)
		}
		if seen.CorrelationID == "caller-chosen" || seen.CorrelationID == seen.ID {
			t.Fatalf("correlation %q: want a fresh one, not the caller's or the id", seen.CorrelationID)
		}
		if seen.ReplyTo != r.ReplyQueue() || !strings.HasPrefix(r.ReplyQueue(), "acemq.reply.") {
			t.Fatalf("reply address %q, reply queue %q", seen.ReplyTo, r.ReplyQueue())
		}
	})
}

func TestRequestWritesBothReplyAddresses(t *testing.T) {
	c := connect(t, "memory://"+t.Name())
	q := requestQueue(t, c, "rpc.addr")
	r := newRequester(t, c)
	_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "x"}, rpc.Timeout(50*time.Millisecond))
	if !errors.Is(err, rpc.ErrRequestTimedOut) {
		t.Fatalf("err %v", err)
	}
	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, ok, err := p.Pull(context.Background(), q)
	if err != nil || !ok {
		t.Fatalf("pull: %v %v", ok, err)
	}
	if m.ReplyTo != r.ReplyQueue() || m.Headers[header.ReplyTo] != r.ReplyQueue() {
		t.Fatalf("reply-to property %q, header %v, want %q", m.ReplyTo, m.Headers[header.ReplyTo], r.ReplyQueue())
	}
}

func TestOutOfOrderRepliesReachTheirOwnRequests(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		const n = 8
		var (
			mu         sync.Mutex
			turn       [n]chan struct{}
			turnOnce   [n]sync.Once
			order      []int
			arrivals   atomic.Int32
			allArrived = make(chan struct{})
			// over ends every wait of the handlers once a request has
			// failed or the test body has returned (before the responder
			// is closed): on a failure path, such as a request that was
			// never sent, the others get an error reply at once instead of
			// waiting out their timeouts, and no handler holds the
			// responder's drain for its whole timeout or outlives the test.
			over   = make(chan struct{})
			finish = sync.OnceFunc(func() { close(over) })
		)
		for i := range turn {
			turn[i] = make(chan struct{})
		}
		// wait blocks until ch closes, the handler's context ends or the
		// test is over.
		wait := func(ctx context.Context, ch <-chan struct{}) error {
			select {
			case <-ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-over:
				return errors.New("the test ended before this request's turn")
			}
		}
		// The responder's settlement of request i happens after reply i was
		// confirmed; only then may request i-1 be answered. A request
		// settled twice (redelivered) opens the turn once.
		hook := acemq.Config{OnSettlement: func(s acemq.Settlement) {
			v, ok := s.Envelope.Header("test-index")
			if !ok {
				return
			}
			i := int(toInt(v))
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if i > 0 && i < n {
				turnOnce[i-1].Do(func() { close(turn[i-1]) })
			}
		}}
		server := connect(t, url, hook)
		client := connect(t, url)
		q := requestQueue(t, server, "rpc.reverse")
		respond(t, server, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
			if arrivals.Add(1) == n {
				close(allArrived)
			}
			if err := wait(ctx, allArrived); err != nil {
				return price{}, err
			}
			if err := wait(ctx, turn[m.Payload.N]); err != nil {
				return price{}, err
			}
			return priceOf(ctx, m)
		}, acemq.ConsumerConfig{Prefetch: n, Concurrency: n})
		t.Cleanup(finish) // runs before the responder's Close
		close(turn[n-1])
		r := newRequester(t, client)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sku := fmt.Sprintf("sku-%d", i)
				got, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: sku, N: i},
					rpc.Timeout(10*time.Second), rpc.WithSendOptions(acemq.SendOptions{Headers: map[string]any{"test-index": i}}))
				if err == nil && got != (price{SKU: sku, Cents: 100 * i}) {
					err = fmt.Errorf("request %d got %+v", i, got)
				}
				if err != nil {
					finish()
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for k, i := range order {
			if i != n-1-k {
				t.Fatalf("answer order %v, want reverse", order)
			}
		}
	})
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	}
	return -1
}

func TestTimeoutErrorSaysTheContractSentence(t *testing.T) {
	e := &rpc.TimeoutError{ID: "req-1", CorrelationID: "corr-1", Timeout: rpc.DefaultTimeout}
	want := "acemq: no reply to request req-1 within 30s (correlation corr-1); it may still be queued, being handled, or done"
	if e.Error() != want {
		t.Fatalf("got  %q\nwant %q", e.Error(), want)
	}
	if !errors.Is(e, rpc.ErrRequestTimedOut) {
		t.Fatal("errors.Is(ErrRequestTimedOut) is false")
	}
}

func TestUnansweredRequestTimesOutAndALateReplyIsUnmatched(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		settled := make(chan acemq.Settlement, 4)
		c := connect(t, url, acemq.Config{OnSettlement: func(s acemq.Settlement) {
			if strings.HasPrefix(s.Queue, rpc.ReplyQueuePrefix) {
				settled <- s
			}
		}})
		q := requestQueue(t, c, "rpc.silent")
		r := newRequester(t, c)
		_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "x"}, rpc.Timeout(150*time.Millisecond))
		var te *rpc.TimeoutError
		if !errors.Is(err, rpc.ErrRequestTimedOut) || !errors.As(err, &te) {
			t.Fatalf("err %v", err)
		}
		want := fmt.Sprintf("acemq: no reply to request %s within 150ms (correlation %s); it may still be queued, being handled, or done", te.ID, te.CorrelationID)
		if err.Error() != want {
			t.Fatalf("got  %q\nwant %q", err.Error(), want)
		}
		// Answer it late, as a slow responder would.
		respond(t, c, q, priceOf)
		s := receive(t, settled)
		if s.Outcome != acemq.ConsumeAcked || s.Envelope.CorrelationID != te.CorrelationID {
			t.Fatalf("late reply settled %+v", s)
		}
		if r.Unmatched() != 1 {
			t.Fatalf("unmatched %d, want 1", r.Unmatched())
		}
	})
}

func TestContextDeadlineSoonerThanTimeoutIsATimeout(t *testing.T) {
	c := connect(t, "memory://"+t.Name())
	q := requestQueue(t, c, "rpc.ctxdeadline")
	r := newRequester(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := rpc.Request[quote, price](ctx, r, "", q, quote{})
	if !errors.Is(err, rpc.ErrRequestTimedOut) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

func TestCancelledContextReturnsTheContextError(t *testing.T) {
	c := connect(t, "memory://"+t.Name())
	q := requestQueue(t, c, "rpc.cancel")
	started, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	respond(t, c, q, func(hctx context.Context, m *acemq.Message[quote]) (price, error) {
		close(started)
		<-release
		return price{}, nil
	})
	defer close(release)
	r := newRequester(t, c)
	go func() { <-started; cancel() }()
	_, err := rpc.Request[quote, price](ctx, r, "", q, quote{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, rpc.ErrRequestTimedOut) {
		t.Fatalf("err %v", err)
	}
}

func TestResponderErrorComesBackAndTheRequestIsDeadLettered(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := requestQueue(t, c, "rpc.failing")
		respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
			return price{}, errors.New("no price for " + m.Payload.SKU)
		})
		dlq := watch(t, c, acemq.DeadLetterQueue(q))
		r := newRequester(t, c)
		_, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "z-9"})
		var re *rpc.ResponderError
		if !errors.As(err, &re) || re.Text != "no price for z-9" {
			t.Fatalf("err %v", err)
		}
		m := receive(t, dlq)
		if m.Envelope.ID != re.ID || m.Envelope.Error != "the handler rejected it: no price for z-9" {
			t.Fatalf("dead-lettered %s with %q, want %s", m.Envelope.ID, m.Envelope.Error, re.ID)
		}
	})
}

func TestRequestWithoutReplyAddressIsDeadLetteredWithTheReason(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := requestQueue(t, c, "rpc.noaddr")
		var called atomic.Bool
		respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
			called.Store(true)
			return price{}, nil
		})
		dlq := watch(t, c, acemq.DeadLetterQueue(q))
		sent, err := c.Publish(context.Background(), "", q, quote{SKU: "lost"}, acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := receive(t, dlq)
		reason := fmt.Sprintf("acemq: request %s carries neither the acemq-reply-to header nor a reply-to property, so there is nowhere to reply", sent.Envelope.ID)
		if m.Envelope.ID != sent.Envelope.ID || m.Envelope.Error != reason {
			t.Fatalf("dead-lettered %s with %q", m.Envelope.ID, m.Envelope.Error)
		}
		if called.Load() {
			t.Fatal("the handler ran for a request it could not answer")
		}
	})
}

func TestHeaderReplyAddressWinsOverTheProperty(t *testing.T) {
	c := connect(t, "memory://"+t.Name())
	q := requestQueue(t, c, "rpc.header")
	right := requestQueue(t, c, "rpc.right")
	wrong := requestQueue(t, c, "rpc.wrong")
	respond(t, c, q, priceOf)
	got := watch(t, c, right)
	err := c.PublishRaw(context.Background(), acemq.RawMessage{
		RoutingKey: q, ContentType: "application/json", MessageID: "m-1", ReplyTo: wrong,
		Headers: map[string]any{header.ReplyTo: right, header.Correlation: "c-1"},
		Body:    []byte(`{"sku":"h","n":2}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := receive(t, got)
	if m.Envelope.CorrelationID != "c-1" || m.Envelope.CausationID != "m-1" || string(m.Payload) != `{"sku":"h","cents":200}` {
		t.Fatalf("reply %+v %s", m.Envelope, m.Payload)
	}
	if info, err := c.QueueInfo(context.Background(), wrong); err != nil || info.Messages != 0 {
		t.Fatalf("property address got %d (%v)", info.Messages, err)
	}
}

func TestReplyQueueIsRecreatedAfterAConnectionDrop(t *testing.T) {
	name := strings.ReplaceAll(t.Name(), "/", "-")
	recovered := make(chan struct{}, 4)
	c := connect(t, "memory://"+name, acemq.Config{WaitForRecovery: true, RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 50 * time.Millisecond, OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventRecovered {
			recovered <- struct{}{}
		}
	}})
	q := requestQueue(t, c, "rpc.recover")
	respond(t, c, q, priceOf)
	r := newRequester(t, c)
	if _, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	memory.Lookup(name).DropConnections()
	receive(t, recovered)
	info, err := c.QueueInfo(context.Background(), r.ReplyQueue())
	if err != nil || info.Consumers != 1 {
		t.Fatalf("reply queue after recovery: %+v %v", info, err)
	}
	got, err := rpc.Request[quote, price](context.Background(), r, "", q, quote{SKU: "b", N: 2}, rpc.Timeout(5*time.Second))
	if err != nil || got.Cents != 200 {
		t.Fatalf("after recovery: %+v %v", got, err)
	}
}

func TestMetricsCountEachOutcome(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c := connect(t, "memory://"+t.Name())
	q := requestQueue(t, c, "rpc.metrics")
	silent := requestQueue(t, c, "rpc.metrics.silent")
	respond(t, c, q, func(ctx context.Context, m *acemq.Message[quote]) (price, error) {
		if m.Payload.N < 0 {
			return price{}, errors.New("negative")
		}
		return priceOf(ctx, m)
	})
	r := newRequester(t, c, rpc.WithMeterProvider(mp))
	ctx := context.Background()
	for _, n := range []int{1, 2} {
		if _, err := rpc.Request[quote, price](ctx, r, "", q, quote{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rpc.Request[quote, price](ctx, r, "", q, quote{N: -1}); err == nil {
		t.Fatal("want an error reply")
	}
	if _, err := rpc.Request[quote, price](ctx, r, "", silent, quote{}, rpc.Timeout(20*time.Millisecond)); err == nil {
		t.Fatal("want a timeout")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	var durations uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != "acemq.request.total" {
					continue
				}
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value(attribute.Key("outcome"))
					k, _ := p.Attributes.Value(attribute.Key("routing.key"))
					tr, _ := p.Attributes.Value(attribute.Key("transport"))
					mt, _ := p.Attributes.Value(attribute.Key("message.type"))
					if tr.AsString() != "memory" || mt.AsString() != k.AsString() {
						t.Fatalf("attributes %v", p.Attributes.ToSlice())
					}
					counts[k.AsString()+" "+o.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				if m.Name == "acemq.request.duration" && m.Unit == "s" {
					for _, p := range d.DataPoints {
						durations += p.Count
					}
				}
			}
		}
	}
	want := map[string]int64{q + " answered": 2, q + " failed": 1, silent + " timed_out": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) || durations != 4 {
		t.Fatalf("counts %v (want %v), durations %d (want 4)", counts, want, durations)
	}
}
