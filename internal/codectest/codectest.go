// Package codectest runs a codec end to end through a consumer on the
// in-process broker (memory://), so each codec package proves that a body
// it cannot read is parked with a reason naming the codec and the content
// type, and that a retryable failure is retried rather than parked.
package codectest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

var seq atomic.Int64

// Outcome is what became of one delivery: the settlement and, for a
// set-aside, the copy found in the target queue.
type Outcome struct {
	Settlement acemq.Settlement
	// Copy is the message pulled from Settlement.Target (nil for an ack
	// or a retry).
	Copy *acemq.Pulled
	// Payload is what the handler received (nil when it did not run).
	Payload any
}

// Deliver publishes one raw body with contentType to a fresh queue on a
// fresh memory:// broker, consumes it with codec into an any, and returns
// what happened to it. For a set-aside it pulls the copy from the target.
func Deliver(t *testing.T, codec acemq.Codec, contentType string, body []byte) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	settled := make(chan acemq.Settlement, 4)
	name := fmt.Sprintf("codectest-%d-%d", time.Now().UnixNano(), seq.Add(1))
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) { settled <- s }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	q := "codec.q"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	got := make(chan any, 1)
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[any]) acemq.Decision {
		got <- m.Payload
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: codec, Retry: acemq.Fixed(3, time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	env := acemq.NewEnvelope()
	if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q, ContentType: contentType, MessageID: env.ID,
		Headers: env.WireHeaders(), Body: body}); err != nil {
		t.Fatal(err)
	}
	var out Outcome
	select {
	case out.Settlement = <-settled:
	case <-ctx.Done():
		t.Fatal("codectest: the delivery was not settled within 20s")
	}
	select {
	case out.Payload = <-got:
	default:
	}
	if out.Settlement.Target != "" && out.Settlement.Target != q {
		p, err := c.NewPuller(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for out.Copy == nil {
			m, ok, err := p.Pull(ctx, out.Settlement.Target)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out.Copy = m
				_ = m.Ack()
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("codectest: nothing reached %s", out.Settlement.Target)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return out
}

// Parked asserts that the body is parked, unread by the handler, with a
// reason containing every one of want (say the codec's name and the
// content type), and that the parked copy keeps the body byte for byte.
func Parked(t *testing.T, codec acemq.Codec, contentType string, body []byte, want ...string) Outcome {
	t.Helper()
	out := Deliver(t, codec, contentType, body)
	s := out.Settlement
	if s.Outcome != acemq.ConsumeParked || !strings.HasSuffix(s.Target, ".parked") || s.Handled {
		t.Fatalf("settlement %+v; want parked, unhandled", s)
	}
	if !strings.HasPrefix(s.Reason, "could not be decoded: ") {
		t.Fatalf("reason %q does not start \"could not be decoded: \"", s.Reason)
	}
	for _, w := range want {
		if !strings.Contains(s.Reason, w) {
			t.Errorf("reason %q does not name %q", s.Reason, w)
		}
	}
	if out.Copy == nil || string(out.Copy.Body) != string(body) || out.Copy.Envelope.Error != s.Reason || out.Copy.ContentType != contentType {
		t.Fatalf("parked copy %+v does not keep the body, content type and reason", out.Copy)
	}
	return out
}
