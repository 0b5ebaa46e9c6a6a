package pipeline

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/replay"
)

func TestThenPublishesTheResultAndAcceptsOnlyAfterTheHop(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		in, out := brokertest.Queue(t, c, "then-in"), brokertest.Queue(t, c, "then-out")
		var ran atomic.Int32
		h := Then(c, "", out, func(ctx context.Context, m *acemq.Message[order]) (priced, bool, error) {
			ran.Add(1)
			if m.Payload.Total == 0 {
				return priced{}, false, nil
			}
			return priced{ID: m.Payload.ID, Total: m.Payload.Total, Tax: 1}, true, nil
		}, acemq.SendOptions{})
		cons, err := acemq.Consume(ctx, c, in, h, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cons.Close(context.Background()) })
		if _, err := c.Publish(ctx, "", in, order{ID: "none", Total: 0}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		sent, err := c.Publish(ctx, "", in, order{ID: "o-1", Total: 5}, acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := brokertest.Pull(t, c, out)
		if got.Envelope.CausationID != sent.Envelope.ID || got.Envelope.CorrelationID != sent.Envelope.CorrelationID ||
			got.Envelope.ID == sent.Envelope.ID || !strings.Contains(string(got.Body), `"tax":1`) {
			t.Fatalf("Then published %+v body %s", got.Envelope, got.Body)
		}
		brokertest.Eventually(t, "both messages settled", func() bool { return ran.Load() == 2 && cons.InFlight() == 0 })
		if n := brokertest.Depth(t, c, out); n != 0 {
			t.Fatalf("a handler returning none published %d message(s)", n)
		}
	})
}

func TestThenRetriesWhenTheHopIsUnroutable(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		in := brokertest.Queue(t, c, "then-unroutable")
		var ran atomic.Int32
		h := Then(c, "", "no-such-queue-anywhere", func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) {
			ran.Add(1)
			return m.Payload, true, nil
		}, acemq.SendOptions{})
		cons, err := acemq.Consume(ctx, c, in, h, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cons.Close(context.Background()) })
		if _, err := c.Publish(ctx, "", in, order{ID: "lost?"}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, "the message is dead-lettered after its retry", func() bool { return brokertest.Depth(t, c, in+".dlq") == 1 })
		var reason string
		if _, err := replay.Browse(ctx, c, in+".dlq", 1, func(m *acemq.Pulled) bool { reason = m.Envelope.Error; return false }, replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/")); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != 1 || !strings.Contains(reason, "could not be published") {
			t.Fatalf("ran %d times, set aside with %q", ran.Load(), reason)
		}
	})
}

func TestThenRetriesAHandlerError(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	ctx := context.Background()
	in := brokertest.Queue(t, c, "then-err")
	var ran atomic.Int32
	h := Then(c, "", in, func(ctx context.Context, m *acemq.Message[order]) (order, bool, error) {
		ran.Add(1)
		return order{}, false, errors.New("down")
	}, acemq.SendOptions{})
	cons, err := acemq.Consume(ctx, c, in, h, acemq.ConsumerConfig{Retry: acemq.NoRetry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close(context.Background()) })
	if _, err := c.Publish(ctx, "", in, order{ID: "x"}, acemq.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, "the failing message is dead-lettered", func() bool { return brokertest.Depth(t, c, in+".dlq") == 1 })
	if ran.Load() != 1 {
		t.Fatalf("ran %d times", ran.Load())
	}
}
