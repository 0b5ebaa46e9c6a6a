package brokertest_test

import (
	"context"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// PullWhere passes over (and takes) a leftover that is not the test's and
// returns the one that is.
func TestPullWhereSkipsWhatDoesNotMatch(t *testing.T) {
	c := brokertest.Connect(t, "memory://brokertest-pullwhere")
	ctx := context.Background()
	if err := c.Apply(ctx, acemq.NewTopology().Queue("fixed", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"leftover", "mine"} {
		if err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: "fixed", MessageID: id, Body: []byte(id)}); err != nil {
			t.Fatal(err)
		}
	}
	m := brokertest.PullWhere(t, c, "fixed", func(m *acemq.Pulled) bool { return m.Envelope.ID == "mine" })
	if m.Envelope.ID != "mine" {
		t.Fatalf("PullWhere returned %q, want mine", m.Envelope.ID)
	}
	if n, err := c.PurgeQueue(ctx, "fixed"); err != nil || n != 0 {
		t.Fatalf("after PullWhere the queue held %d (%v), want 0: the leftover is taken too", n, err)
	}
}
