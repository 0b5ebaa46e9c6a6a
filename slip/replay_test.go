package slip

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/replay"
)

// A run dead-lettered because its next step's queue was missing resumes
// where it stopped once the queue exists and the .dlq is replayed: the
// failed step runs again and hops on with the slip it had, the first
// step now done.
func TestReplayingADeadLetteredRunResumesAtTheFailedStep(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		q := brokertest.Queue(t, c, "slip.replay")
		handled := follower(t, c, q, acemq.ConsumerConfig{Retry: acemq.Fixed(1, 0)})
		later := q + ".later"
		s, _ := New(To("", q, "first"), To("", later, "second"))
		sent, err := Start(ctx, c, s, "x", acemq.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next(t, handled)
		brokertest.Eventually(t, "the run dead-lettered", func() bool { return brokertest.Depth(t, c, acemq.DeadLetterQueue(q)) == 1 })

		// The missing step's queue appears; the operator replays.
		if err := c.Apply(ctx, acemq.NewTopology().Queue(later, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), later) })
		rep, err := replay.Queue(ctx, c, acemq.DeadLetterQueue(q))
		if err != nil || rep.Moved != 1 {
			t.Fatalf("replay: %+v %v", rep, err)
		}
		again := next(t, handled)
		if again.Envelope.CorrelationID != sent.Envelope.CorrelationID {
			t.Fatalf("the replayed message's correlation %s, want the run's %s", again.Envelope.CorrelationID, sent.Envelope.CorrelationID)
		}
		m := brokertest.Pull(t, c, later)
		_, ls, err := Of(m.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls.Steps) != 1 || ls.Steps[0].Name != "second" || len(ls.Done) != 1 || ls.Done[0].Name != "first" {
			t.Fatalf("the slip after the replay %+v: the run must resume at the failed step and go on", ls)
		}
		if m.Envelope.CorrelationID != sent.Envelope.CorrelationID || string(m.Body) != `"x"` {
			t.Fatalf("the resumed hop: correlation %s body %q", m.Envelope.CorrelationID, m.Body)
		}
	})
}
