package rabbitmq

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

type blockEvent struct {
	active bool
	reason string
}

func TestMemoryAlarmReportsBlockedThenUnblocked(t *testing.T) {
	events := make(chan blockEvent, 8)
	c := dial(t, transport.Config{OnBlocked: func(active bool, reason string) {
		events <- blockEvent{active, reason}
	}})
	p := openPublisher(t, c)
	// Restore first, so a failure anywhere below cannot leave the shared
	// node blocked.
	t.Cleanup(func() { testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0.4") })
	testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0")

	// RabbitMQ tells a connection it is blocked only once it publishes.
	if err := p.Publish(context.Background(), &transport.Message{RoutingKey: testenv.Unique("blocked")}, func(transport.Confirmation) {}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	expect := func(want blockEvent) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("OnBlocked%v, want %v", got, want)
			}
		case <-time.After(wait):
			t.Fatalf("no OnBlocked%v within %s", want, wait)
		}
	}
	expect(blockEvent{true, "low on memory"})
	testenv.RabbitCtl(t, "set_vm_memory_high_watermark", "0.4")
	expect(blockEvent{false, ""})
}
