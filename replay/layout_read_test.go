package replay_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
)

// The replicated layout's .dlq and .parked are quorum queues declared with
// no delivery limit (x-delivery-limit -1 on RabbitMQ 4, none on 3), so a
// read is safe on every version and fifty reads leave every dead letter
// in its place: the console and acemq dlq read them as they read the
// classic layout's. (A quorum .dlq declared without -1 on RabbitMQ 4 has
// the default limit of 20: there reads are refused before 4.3.)
func TestTheReplicatedLayoutsDeadLetterQueuesAreSafeToRead(t *testing.T) {
	c := connect(t, testenv.AMQPURL(t), acemq.Config{Layout: acemq.ReplicatedLayout})
	ctx := context.Background()
	q := testenv.Unique("replay.layout")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	for _, dlq := range []string{acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
		ids := fill(t, c, dlq, "m", 3)
		a, err := replay.Inspect(ctx, c, dlq, manage(c))
		if err != nil {
			t.Fatal(err)
		}
		if a.Type != "quorum" || !a.Safe || a.DeliveryLimit != 0 {
			t.Fatalf("%s: %+v, want a quorum queue with no limit, safe to read", dlq, a)
		}
		for i := range 50 {
			var seen []string
			_, err := replay.Browse(ctx, c, dlq, 100, func(m *acemq.Pulled) bool {
				seen = append(seen, m.Envelope.ID)
				return true
			}, manage(c))
			var unsafe *replay.UnsafeReadError
			if errors.As(err, &unsafe) || err != nil || !slices.Equal(seen, ids) {
				t.Fatalf("read %d of %s: saw %v, %v; want %v", i+1, dlq, seen, err, ids)
			}
		}
		var got []string
		for _, m := range drain(t, c, dlq) {
			got = append(got, m.Envelope.ID)
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("after 50 reads %s holds %v, want %v", dlq, got, ids)
		}
	}
}
