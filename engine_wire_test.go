package acemq_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// A top-level null application header ('V', nil) is an application
// header like any other (contract §1.1 "as given", §1.8 "application
// headers preserved"): the handler sees it in Headers and the set-aside
// copy carries it, as it carries a nested null. It was dropped from both.
func TestANullApplicationHeaderReachesTheHandlerAndTheSetAsideCopy(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		seen := decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Reject(errors.New("no")) })
		env := acemq.NewEnvelope()
		env.Type = "order"
		h := env.WireHeaders()
		h["x-null"] = nil
		h["x-nested"] = map[string]any{"inner": nil}
		if err := r.c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: q, ContentType: "application/json", MessageID: env.ID, Headers: h, Body: []byte(`{"id":"n"}`),
		}); err != nil {
			t.Fatal(err)
		}
		m := <-seen
		if v, ok := m.Envelope.Headers()["x-null"]; !ok || v != nil {
			t.Errorf("the handler's Envelope.Headers() = %v: x-null is missing", m.Envelope.Headers())
		}
		c := r.pull(q + ".dlq")
		if v, ok := c.Envelope.Header("x-null"); !ok || v != nil {
			t.Errorf("the set-aside copy's headers = %v: x-null is missing", c.Envelope.Headers())
		}
		if _, ok := c.Envelope.Header("x-nested"); !ok {
			t.Errorf("the set-aside copy lost x-nested")
		}
	})
}

// A uint or uint64 above math.MaxInt64 fits no signed AMQP integer (the
// engine writes unsigned values as the next wider signed type, the only
// integers every family client reads): Send, SendAll and PublishRaw refuse
// it as ErrHeaderLimit with a sentence saying what to send instead,
// nothing reaches the queue, and the Conn stays open.
func TestAnUnsignedHeaderAboveMaxInt64IsRefusedWithASentence(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		q := r.named("q")
		r.queue(q)
		check := func(what string, err error) {
			t.Helper()
			var pe *acemq.PublishError
			if !errors.Is(err, acemq.ErrHeaderLimit) || !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeRefused {
				t.Fatalf("%s: %v; want a refused, unsent PublishError matching ErrHeaderLimit", what, err)
			}
			for _, says := range []string{"acemq: ", `"x-big`, "18446744073709551615", "as a string"} {
				if !strings.Contains(err.Error(), says) {
					t.Fatalf("%s: %q does not say %q", what, err, says)
				}
			}
		}
		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		_, err := pub.SendWith(ctx, order{ID: "a"}, acemq.SendOptions{Headers: map[string]any{"x-big": uint64(math.MaxUint64)}})
		check("Send", err)
		_, err = pub.SendAllWith(ctx, []order{{ID: "b"}}, acemq.SendOptions{Headers: map[string]any{"x-big": []any{uint64(math.MaxUint64)}}})
		check("SendAll", err)
		env := acemq.NewEnvelope()
		h := env.WireHeaders()
		h["x-big"] = map[string]any{"k": uint(math.MaxUint64)}
		check("PublishRaw", r.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, MessageID: env.ID, Headers: h, Body: []byte(`{}`)}))
		if st := r.c.State(); st != acemq.StateOpen {
			t.Fatalf("state %s after the refusals, want open", st)
		}
		r.send(q, order{ID: "ok"})
		if n := r.ready(q); n != 1 {
			t.Fatalf("%d messages ready after three refusals and one send, want 1", n)
		}
	})
}

// A Go int past 32 bits and unsigned values reach another client exactly,
// as signed types every family client reads, on the message sent and on
// its set-aside copy, whichever frames setting wrote them (contract §1.1:
// application headers as given). With frames=amqp091 an int past 32 bits
// was written as a 32-bit 'I' (2147483648 became -2147483648, 1<<40 became
// 0), and unsigned values went out as 'B', 'u' and 'i', which bunny
// cannot read.
func TestWideAndUnsignedIntegerHeadersSurviveTheSetAsideCopyOnEveryFramesSetting(t *testing.T) {
	for _, frames := range []string{"native", "amqp091"} {
		t.Run(frames, func(t *testing.T) {
			r := newRabbitRigAt(t, withSetting(t, testenv.AMQPURL(t), "frames", frames))
			q := r.named("q")
			r.queue(q)
			decide(r, q, func(*acemq.Message[order]) acemq.Decision { return acemq.Reject(errors.New("no")) })
			sent := r.send(q, order{ID: "w"}, acemq.SendOptions{Headers: map[string]any{
				"x-int31": int(1) << 31, "x-int40": int(1) << 40, "x-int53": int(1)<<53 + 1, "x-neg40": -(int(1) << 40),
				"x-u8": uint8(200), "x-u16": uint16(65000), "x-u32": uint32(4000000000), "x-u64": uint64(math.MaxInt64),
			}})
			assertOne(t, r, sent.Envelope.ID, acemq.ConsumeRejected, q+".dlq", "the handler rejected it: no")
			ch := testenv.RawChannel(t, testenv.AMQPURL(t))
			var d amqp.Delivery
			for deadline := time.Now().Add(waitLimit); ; {
				got, ok, err := ch.Get(q+".dlq", true)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					d = got
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing in %s.dlq", q)
				}
				time.Sleep(5 * time.Millisecond) // polling a queue: no event exists
			}
			want := map[string]any{
				"x-int31": int64(1) << 31, "x-int40": int64(1) << 40, "x-int53": int64(1)<<53 + 1, "x-neg40": -(int64(1) << 40),
				"x-u8": int16(200), "x-u16": int32(65000), "x-u32": int64(4000000000), "x-u64": int64(math.MaxInt64),
			}
			for k, v := range want {
				if d.Headers[k] != v {
					t.Errorf("set-aside copy's %s = %T %v, want %T %v", k, d.Headers[k], d.Headers[k], v, v)
				}
			}
		})
	}
}

// withSetting sets one query parameter of a broker URL.
func withSetting(t *testing.T, raw, name, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}
