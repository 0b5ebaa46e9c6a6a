package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// Per-step options: Consumers(n) puts n consumers on the step's queue,
// and StepCodec is the codec the step reads with and the step before it
// writes with (here the first step reads JSON, the Conn's codec, and
// writes text for the second).
func TestStepCodecAndConsumersApplyToTheirStep(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		got := make(chan *acemq.Message[string], 4)
		p, err := New(fmt.Sprintf("stepopts-%d", time.Now().UnixNano()),
			NewStep("shout", func(ctx context.Context, m *acemq.Message[string]) (string, bool, error) {
				return strings.ToUpper(m.Payload), true, nil
			}),
			NewStep("print", func(ctx context.Context, m *acemq.Message[string]) (string, bool, error) {
				got <- m
				return m.Payload, true, nil
			}, StepCodec(acemq.Text()), Consumers(3)),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, p.Topology()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, s := range p.Steps() {
				for _, q := range []string{p.Queue(s), p.Queue(s) + ".dlq"} {
					_, _ = c.DeleteQueue(context.Background(), q)
				}
			}
		})
		run, err := p.Start(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := run.Close(ctx); err != nil {
				t.Error(err)
			}
		})
		brokertest.Eventually(t, "three consumers on the print step and one on shout", func() bool {
			return brokertest.Consumers(t, c, p.Queue("print")) == 3 && brokertest.Consumers(t, c, p.Queue("shout")) == 1
		})
		if _, err := p.Send(ctx, c, "hello", acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if m.Payload != "HELLO" || !strings.HasPrefix(m.ContentType, "text/plain") {
				t.Fatalf("print got %q as %q; want HELLO written with its StepCodec (text/plain)", m.Payload, m.ContentType)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not reach the second step in 10 s")
		}
	})
}
