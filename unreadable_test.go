package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// nestedHeader returns a table nested n levels deep (a table of scalars
// is 1).
func nestedHeader(n int) map[string]any {
	t := map[string]any{"leaf": "x"}
	for i := 1; i < n; i++ {
		t = map[string]any{"a": t}
	}
	return t
}

func wideHeader(n int) map[string]any {
	t := make(map[string]any, n)
	for i := 0; i < n; i++ {
		t[fmt.Sprintf("k%05d", i)] = int32(i)
	}
	return t
}

func TestSendRefusesHeadersGoConsumersCannotRead(t *testing.T) {
	cases := []struct {
		name  string
		value any
		want  string
	}{
		{"deep", nestedHeader(40), `header "x-deep" nests tables or arrays 40 levels deep, over the limit of 32 that Go consumers (amqp091-go) can read`},
		{"wide", wideHeader(10000), `header "x-wide" holds 10000 entries, over the limit of 8192 per table or array`},
		{"array", []any{nestedHeader(33)}, `header "x-array" nests tables or arrays 34 levels deep`},
		{"nan", math.NaN(), `header "x-nan" holds the float NaN, which RabbitMQ cannot decode (it closes the publishing connection on it)`},
		{"inf", map[string]any{"list": []any{float32(math.Inf(-1))}}, `header "x-inf.list[0]" holds the float -Inf`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.queue("q")
			_, err := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{}).SendWith(context.Background(), order{ID: "1"}, acemq.SendOptions{Headers: map[string]any{"x-" + tc.name: tc.value}})
			var pe *acemq.PublishError
			if !errors.Is(err, acemq.ErrHeaderLimit) || !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeRefused {
				t.Fatalf("Send = %v, want a refused, unsent PublishError matching ErrHeaderLimit", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "acemq: cannot publish message ") || !strings.Contains(err.Error(), "nothing was sent") {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if n := r.ready("q"); n != 0 {
				t.Fatalf("%d messages reached the queue, want none", n)
			}
		})
	}
}

func TestHeadersAtTheLimitAreSent(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	r.send("q", order{ID: "1"}, acemq.SendOptions{Headers: map[string]any{"x-deep": nestedHeader(32)}})
	if n := r.ready("q"); n != 1 {
		t.Fatalf("%d messages on the queue, want 1", n)
	}
}

func TestInterceptorHeaderOverTheLimitIsRefused(t *testing.T) {
	r := newRig(t, acemq.Config{PublishInterceptors: []acemq.PublishInterceptor{func(ctx context.Context, p *acemq.PublishContext) error {
		return p.SetHeader("x-wide", wideHeader(8193))
	}}})
	r.queue("q")
	_, err := acemq.NewPublisher[order](r.c, "", "q", acemq.PublisherConfig{}).Send(context.Background(), order{ID: "1"})
	if !errors.Is(err, acemq.ErrHeaderLimit) || !strings.Contains(err.Error(), `header "x-wide" holds 8193 entries`) {
		t.Fatalf("Send = %v, want the header-limit refusal naming x-wide", err)
	}
	if n := r.ready("q"); n != 0 {
		t.Fatalf("%d messages reached the queue, want none", n)
	}
}

func TestPublishRawRefusesHeadersOverTheLimit(t *testing.T) {
	r := newRig(t)
	r.queue("q")
	err := r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: "q", Body: []byte("x"), Headers: map[string]any{"x-deep": nestedHeader(33)}})
	if !errors.Is(err, acemq.ErrHeaderLimit) {
		t.Fatalf("PublishRaw = %v, want ErrHeaderLimit", err)
	}
	if n := r.ready("q"); n != 0 {
		t.Fatalf("%d messages reached the queue, want none", n)
	}
}

func TestRabbitSendRefusesHeadersOverTheLimit(t *testing.T) {
	c, _ := rabbit(t)
	q := classicQueue(t, c, "limit")
	_, err := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{}).SendWith(context.Background(), order{ID: "1"}, acemq.SendOptions{Headers: map[string]any{"x-deep": nestedHeader(40)}})
	if !errors.Is(err, acemq.ErrHeaderLimit) {
		t.Fatalf("Send = %v, want ErrHeaderLimit", err)
	}
	if n := queueDepth(t, c, q); n != 0 {
		t.Fatalf("%d messages reached the queue, want none", n)
	}
}

// RabbitMQ cannot decode a NaN or infinite float in a header and closes the
// publishing connection on one, failing every publish in flight with it;
// the library refuses it before writing, so the connection and the next
// publish are untouched.
func TestRabbitSendRefusesANonFiniteFloatHeaderAndKeepsTheConnection(t *testing.T) {
	c, _ := rabbit(t)
	q := classicQueue(t, c, "nonfinite")
	pub := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{})
	_, err := pub.SendWith(context.Background(), order{ID: "1"}, acemq.SendOptions{Headers: map[string]any{"x-ratio": math.Inf(1)}})
	if !errors.Is(err, acemq.ErrHeaderLimit) {
		t.Fatalf("Send = %v, want ErrHeaderLimit", err)
	}
	if _, err := pub.SendWith(context.Background(), order{ID: "2"}, acemq.SendOptions{Headers: map[string]any{"x-ratio": 0.5}}); err != nil {
		t.Fatalf("the next publish: %v", err)
	}
	if n := queueDepth(t, c, q); n != 1 {
		t.Fatalf("%d messages in the queue, want the one finite publish", n)
	}
}

// The proof: messages another client can publish and amqp091-go
// cannot read, between ordinary ones, on a quorum queue with prefetch 20.
// Before, each killed the consuming connection and came back to the head
// of the queue about once a second for ever, and the ordinary messages
// prefetched with it were handled again on every lap.
func TestRabbitUnreadableHeadersAreParkedAndNothingElseIsHeldUp(t *testing.T) {
	c, log := rabbit(t)
	q := testenv.Unique("unreadable")
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueues(t, q, q+".dlq", q+".parked") })

	ch := testenv.RawChannel(t, testenv.AMQPURL(t))
	var ordinary []string
	publish := func(id string, h amqp.Table) {
		t.Helper()
		if err := ch.Publish("", q, false, false, amqp.Publishing{MessageId: id, ContentType: "application/json", Headers: h, Body: []byte(`{"id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("ok-%02d", i)
		ordinary = append(ordinary, id)
		publish(id, amqp.Table{"x-app": "fine"})
		switch i {
		case 10:
			deep := amqp.Table{"leaf": "x"}
			for range 39 {
				deep = amqp.Table{"a": deep}
			}
			publish("deep", amqp.Table{"x-app": "kept", "x-deep": deep})
		case 20:
			publish("wide", amqp.Table{"x-wide": amqp.Table(wideHeader(10000))})
		}
	}

	var mu sync.Mutex
	handled := map[string]int{}
	k, err := acemq.Consume(context.Background(), c, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		mu.Lock()
		handled[m.Envelope.ID]++
		mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{Prefetch: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())

	eventually(t, 30*time.Second, "every ordinary message handled and both bad ones parked", func() bool {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		return n >= len(ordinary) && queueDepth(t, c, q+".parked") == 2
	})
	mu.Lock()
	for _, id := range ordinary {
		if handled[id] != 1 {
			t.Errorf("%s handled %d times, want once", id, handled[id])
		}
	}
	if handled["deep"] != 0 || handled["wide"] != 0 {
		t.Errorf("the handler saw an unreadable message: %v", handled)
	}
	mu.Unlock()
	if kinds := strings.Join(log.kinds(), ","); strings.Contains(kinds, string(acemq.EventLost)) {
		t.Errorf("the connection was lost: events %s", kinds)
	}
	if h := c.Health(context.Background()); h.Status != acemq.StatusUp {
		t.Errorf("health %s: %s, want UP", h.Status, h.Detail)
	}

	p, err := c.NewPuller(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := map[string]string{
		"deep": `header "x-deep" nests tables or arrays 40 levels deep, over the limit of 32`,
		"wide": `header "x-wide" holds 10000 entries, over the limit of 8192`,
	}
	for range 2 {
		m, ok, err := p.Pull(context.Background(), q+".parked")
		if err != nil || !ok {
			t.Fatalf("pull parked: %v %v", ok, err)
		}
		w := want[m.Envelope.ID]
		if w == "" || !strings.HasPrefix(m.Envelope.Error, "its headers cannot be read by the Go AMQP client (amqp091-go): ") || !strings.Contains(m.Envelope.Error, w) {
			t.Fatalf("parked %s with reason %q, want it to say %q", m.Envelope.ID, m.Envelope.Error, w)
		}
		if _, ok := m.Envelope.Headers()["acemq-unreadable-headers"].([]byte); !ok {
			t.Fatalf("parked %s without its original headers: %v", m.Envelope.ID, m.Envelope.Headers())
		}
		if m.Envelope.ID == "deep" && m.Envelope.Headers()["x-app"] != "kept" {
			t.Fatalf("the readable header x-app was not kept: %v", m.Envelope.Headers())
		}
		_ = m.Ack()
	}
}
