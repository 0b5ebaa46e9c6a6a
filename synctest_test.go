package acemq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// TestAConnWorksInSuccessiveSynctestBubbles runs the same publishing in
// three synctest bubbles, one after the other. A synctest bubble owns the
// channels and timers made in it, and using them from another bubble is a
// fatal error; a batch pooled package-wide (with its timer and channel)
// carried them from the first bubble's Conn into the second's SendAll,
// which died with "receive on synctest channel from outside bubble".
// acemqtest runs every harness in a bubble, so a user's second test
// would have died the same way.
func TestAConnWorksInSuccessiveSynctestBubbles(t *testing.T) {
	for i := range 3 {
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			name := strings.NewReplacer("/", "-").Replace(fmt.Sprintf("%s-%d", t.Name(), i))
			t.Cleanup(func() { memory.Delete(name) })
			c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			if err := c.Apply(ctx, acemq.NewTopology().Queue("q", acemq.QueueOptions{})); err != nil {
				t.Fatal(err)
			}
			p := acemq.NewPublisher[string](c, "", "q", acemq.PublisherConfig{})
			done := make(chan error)
			for range 4 {
				go func() {
					_, err := p.SendAll(ctx, []string{"a", "b", "c"})
					done <- err
				}()
				go func() {
					_, err := p.Send(ctx, "d")
					done <- err
				}()
			}
			for range 8 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
