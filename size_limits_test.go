package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
)

// onEveryFrameWriter runs fn on memory:// and on RabbitMQ with each of the
// transport's frame writers: frames=native (the default) and
// frames=amqp091.
func onEveryFrameWriter(t *testing.T, fn func(t *testing.T, r *rig), opts ...acemq.Config) {
	t.Run("memory", func(t *testing.T) { fn(t, newRig(t, opts...)) })
	t.Run("rabbitmq-native", func(t *testing.T) { fn(t, newRabbitRig(t, opts...)) })
	t.Run("rabbitmq-amqp091", func(t *testing.T) {
		r := newRabbitRig(t, opts...)
		amqp091 := &rig{t: t, url: r.url + "?frames=amqp091", rabbit: true}
		amqp091.connect(opts)
		t.Cleanup(func() { r.made = append(r.made, amqp091.made...) }) // deleted by r's cleanup, after this Conn's
		fn(t, amqp091)
	})
}

func bigHeader(n int) acemq.SendOptions {
	return acemq.SendOptions{Headers: map[string]any{"x-big": strings.Repeat("b", n)}}
}

// A content header over frame_max makes RabbitMQ close the whole
// publishing connection, failing every publish in flight on it. Every
// publish path refuses it before writing, and the publishes beside it are
// confirmed as usual.
func TestAPublishOverFrameMaxIsRefusedBeforeWritingAndNothingElseIsAffected(t *testing.T) {
	onEveryFrameWriter(t, func(t *testing.T, r *rig) {
		q := r.named("framemax")
		r.queue(q)
		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		ctx := context.Background()

		const beside = 40
		var wg sync.WaitGroup
		errs := make(chan error, beside)
		for i := range beside {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := pub.Send(ctx, order{ID: itoa(int64(i))})
				errs <- err
			}()
		}
		check := func(what string, err error) {
			t.Helper()
			var pe *acemq.PublishError
			var le *transport.LimitError
			if !errors.Is(err, acemq.ErrHeaderLimit) || !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeRefused || !errors.As(err, &le) {
				t.Fatalf("%s = %v, want a refused, unsent PublishError matching ErrHeaderLimit", what, err)
			}
			for _, want := range []string{"acemq: cannot publish message ", "over the connection's frame_max of 131072", "nothing was sent"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: %q does not say %q", what, err, want)
				}
			}
		}
		_, err := pub.SendWith(ctx, order{ID: "big"}, bigHeader(140000))
		check("Send", err)
		_, err = pub.SendAllWith(ctx, []order{{ID: "big1"}, {ID: "big2"}}, bigHeader(140000))
		check("SendAll", err)
		err = r.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, Body: []byte("x"), Headers: map[string]any{"x-big": strings.Repeat("b", 140000)}})
		check("PublishRaw", err)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a publish beside the refused ones failed: %v", err)
			}
		}
		r.send(q, order{ID: "after"})
		if n := r.ready(q); n != beside+1 {
			t.Fatalf("%d messages on the queue, want %d", n, beside+1)
		}
	})
}

// RabbitMQ 4 refuses a body over 16 MiB (its max_message_size) by closing
// the publishing channel; the library refuses it first, on every broker,
// and says what to do.
func TestABodyOverTheMaximumMessageSizeIsRefusedBeforeWriting(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("bigbody")
		r.queue(q)
		ctx := context.Background()
		body := make([]byte, 20<<20)
		check := func(what string, err error) {
			t.Helper()
			var pe *acemq.PublishError
			if !errors.Is(err, acemq.ErrMessageTooLarge) || !errors.As(err, &pe) || pe.Sent || pe.Outcome != acemq.OutcomeRefused {
				t.Fatalf("%s = %v, want a refused, unsent PublishError matching ErrMessageTooLarge", what, err)
			}
			for _, want := range []string{"its body is 20971520 bytes, over the maximum message size of 16777216", "Config.MaxMessageSize", "claim check (package claimcheck)", "nothing was sent"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: %q does not say %q", what, err, want)
				}
			}
		}
		pub := acemq.NewPublisher[[]byte](r.c, "", q, acemq.PublisherConfig{Codec: acemq.Bytes()})
		_, err := pub.Send(ctx, body)
		check("Send", err)
		_, err = pub.SendAll(ctx, [][]byte{body})
		check("SendAll", err)
		check("PublishRaw", r.c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, Body: body}))
		if n := r.ready(q); n != 0 {
			t.Fatalf("%d messages reached the queue, want none", n)
		}
	})
}

func TestMaxMessageSizeIsASetting(t *testing.T) {
	r := newRig(t, acemq.Config{MaxMessageSize: 1000})
	r.queue("q")
	if got := r.c.Config().MaxMessageSize; got != 1000 {
		t.Fatalf("Config().MaxMessageSize = %d, want 1000", got)
	}
	_, err := acemq.NewPublisher[[]byte](r.c, "", "q", acemq.PublisherConfig{Codec: acemq.Bytes()}).Send(context.Background(), make([]byte, 1001))
	if !errors.Is(err, acemq.ErrMessageTooLarge) || !strings.Contains(err.Error(), "its body is 1001 bytes, over the maximum message size of 1000") {
		t.Fatalf("Send = %v, want ErrMessageTooLarge at 1000 bytes", err)
	}
	if got := newRig(t).c.Config().MaxMessageSize; got != 16<<20 {
		t.Fatalf("the default MaxMessageSize is %d, want 16 MiB", got)
	}
}

// When the broker's max_message_size is below the library's limit, the
// broker's refusal (406, closing the publishing channel) says the message
// certainly did not arrive; the next publish goes through.
func TestABrokerRefusalOfAnOversizedBodyIsNotSent(t *testing.T) {
	r := &rig{t: t, name: "brokersize", url: "memory://brokersize?max_message_size=1024"}
	t.Cleanup(func() { memory.Delete("brokersize") })
	r.connect([]acemq.Config{{MaxMessageSize: -1}})
	r.queue("q")
	pub := acemq.NewPublisher[[]byte](r.c, "", "q", acemq.PublisherConfig{Codec: acemq.Bytes()})
	_, err := pub.Send(context.Background(), make([]byte, 2000))
	var pe *acemq.PublishError
	if !errors.Is(err, acemq.ErrMessageTooLarge) || !errors.As(err, &pe) || pe.Sent || pe.ReplyCode != 406 {
		t.Fatalf("Send = %v, want an unsent PublishError with reply code 406 matching ErrMessageTooLarge", err)
	}
	for _, want := range []string{"message size 2000 is larger than configured max size 1024", "over the broker's max_message_size of 1024", "nothing was sent", "claimcheck", "Config.MaxMessageSize to 1024"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
	if _, err := pub.Send(context.Background(), make([]byte, 1000)); err != nil {
		t.Fatalf("the next Send failed: %v", err)
	}
}

// sendJustUnderFrameMax publishes to q, as another client would (no
// first-seen), a message whose content header frame is spare bytes under
// frame_max, its bulk in the application header x-big, and returns x-big's
// length.
func sendJustUnderFrameMax(r *rig, q string, spare int) int {
	r.t.Helper()
	raw := func(n int) error {
		return r.c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: q, ContentType: "application/json", MessageID: "big-1",
			Headers: map[string]any{"x-acemq-id": "big-1", "x-big": strings.Repeat("b", n)}, Body: []byte(`{"ID":"big"}`)})
	}
	var le *transport.LimitError
	if err := raw(transport.DefaultFrameMax); !errors.As(err, &le) {
		r.t.Fatalf("PublishRaw of a frame_max-sized header = %v, want a LimitError", err)
	}
	n := transport.DefaultFrameMax - (le.Size - transport.DefaultFrameMax) - spare
	if err := raw(n); err != nil {
		r.t.Fatalf("PublishRaw of a header just under frame_max: %v", err)
	}
	return n
}

// A delivery whose content header is just under frame_max makes a
// set-aside copy over it (the copy adds the reason). Written anyway, the
// broker closed the connection, the delivery came back, for ever. The copy
// is made to fit instead: it leaves out the large header and says so, and
// the delivery ends in {q}.dlq or {q}.parked; the next message is handled.
func TestASetAsideCopyOverFrameMaxIsMadeToFitAndEndsWhereAnOperatorFindsIt(t *testing.T) {
	cases := []struct {
		name    string
		decide  acemq.Decision
		target  string
		outcome acemq.Outcome
		reason  string
		policy  acemq.RetryPolicy
	}{
		{"reject", acemq.Reject(errors.New("no")), ".dlq", acemq.ConsumeRejected, "the handler rejected it: no", acemq.RetryPolicy{}},
		{"park", acemq.Park(errors.New("later")), ".parked", acemq.ConsumeParked, "the handler parked it: later", acemq.RetryPolicy{}},
		{"retry-in-consumer", acemq.Retry(errors.New("again")), ".dlq", acemq.ConsumeRetried, "its retry copy could not be written (the content header frame would be", acemq.Exponential(3, time.Millisecond, 0)},
		{"retry-on-a-rung", acemq.Retry(errors.New("again")), ".dlq", acemq.ConsumeRetried, "its retry copy could not be written (the content header frame would be", acemq.Fixed(3, time.Second).WaitInBrokerFrom(time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			onEveryFrameWriter(t, func(t *testing.T, r *rig) {
				q := r.named("fit")
				typ := acemq.Classic
				if r.rabbit {
					typ = acemq.Quorum // as in the report
				}
				if err := r.c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: typ})); err != nil {
					t.Fatal(err)
				}
				n := sendJustUnderFrameMax(r, q, 8)
				r.send(q, order{ID: "small"})
				consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
					if m.Payload.ID == "big" {
						return tc.decide
					}
					return acemq.Accept()
				}, acemq.ConsumerConfig{Retry: tc.policy})
				var big, small bool
				for !big || !small {
					s := r.nextSettlement()
					switch {
					case s.Envelope.Headers()["x-big"] != nil && s.Outcome == tc.outcome && !big:
						big = true
					case s.Outcome == acemq.ConsumeAcked:
						small = true
					default:
						t.Fatalf("unexpected settlement %+v", s)
					}
				}
				copyOf := r.pull(q + tc.target)
				reason := copyOf.Envelope.Error
				for _, want := range []string{tc.reason, `this copy leaves out header "x-big" (`, "over the connection's frame_max of 131072"} {
					if !strings.Contains(reason, want) {
						t.Fatalf("x-acemq-error %q does not say %q", reason, want)
					}
				}
				if _, kept := copyOf.Envelope.Headers()["x-big"]; kept {
					t.Fatalf("the copy kept x-big (%d bytes)", n)
				}
				if !strings.Contains(string(copyOf.Body), `"big"`) {
					t.Fatalf("the copy's body is %q, want the original's", copyOf.Body)
				}
				r.waitReady(q, 0)
			})
		})
	}
}

func TestAPublishOverFrameMaxIsRefusedWithConfirmsOffToo(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("framemax.unconfirmed")
		r.queue(q)
		pub := acemq.NewPublisher[order](r.c, "", q, acemq.PublisherConfig{})
		_, err := pub.SendWith(context.Background(), order{ID: "big"}, bigHeader(140000))
		var pe *acemq.PublishError
		if !errors.Is(err, acemq.ErrHeaderLimit) || !errors.As(err, &pe) || pe.Sent {
			t.Fatalf("Send = %v, want an unsent refusal matching ErrHeaderLimit", err)
		}
		if _, err := pub.Send(context.Background(), order{ID: "after"}); err != nil {
			t.Fatalf("the next Send failed: %v", err)
		}
	}, acemq.Config{NoPublisherConfirms: true})
}
