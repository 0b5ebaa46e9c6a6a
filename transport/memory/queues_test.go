package memory

import (
	"context"
	"slices"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

func TestQueuesListsEveryQueueSortedAndForgetsDeletedOnes(t *testing.T) {
	b, name := newTestBroker(t)
	if got := b.Queues(); len(got) != 0 {
		t.Fatalf("a fresh broker lists %v, want nothing", got)
	}
	ch := chanT(t, dialT(t, name, nil))
	ctx := context.Background()
	for _, q := range []string{"orders.dlq", "orders", "audit"} {
		if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: q, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Queues(), []string{"audit", "orders", "orders.dlq"}; !slices.Equal(got, want) {
		t.Fatalf("Queues() = %v, want %v", got, want)
	}
	if _, err := ch.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Queues(), []string{"audit", "orders.dlq"}; !slices.Equal(got, want) {
		t.Fatalf("after deleting orders, Queues() = %v, want %v", got, want)
	}
}
