package acemq_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// blockAndWait raises b's resource alarm with reason as RabbitMQ delivers
// it: no connection is told until it publishes. So it publishes once on c
// (a raw, not mandatory publish to a key no queue has; raw publishes do not
// count in Stats), which the broker holds unconfirmed, and waits until c
// reports Blocked. The held publish's result arrives on the returned
// channel once the broker unblocks (or at c's confirm timeout). At cleanup
// the publish is abandoned and its goroutine waited for.
func blockAndWait(t *testing.T, c *acemq.Conn, b *memory.Broker, reason string) <-chan error {
	t.Helper()
	b.Block(reason)
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		held <- c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: "acemq-test-held-during-alarm", NotMandatory: true, Body: []byte("held")})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(waitLimit)
	for !c.Blocked() {
		select {
		case err := <-held:
			t.Fatalf("the publish after the alarm ended (%v) before the Conn was told it is blocked", err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Conn was not told it is blocked within %s of publishing during the alarm", waitLimit)
		}
	}
	if got := c.BlockedReason(); got != reason {
		t.Fatalf("BlockedReason %q, want %q", got, reason)
	}
	select {
	case err := <-held:
		t.Fatalf("the publish written during the alarm was answered (%v) while blocked", err)
	default:
	}
	return held
}

// notBlockedYet checks that raising b's alarm told c nothing: RabbitMQ
// tells a connection only when it publishes.
func notBlockedYet(t *testing.T, c *acemq.Conn, b *memory.Broker) {
	t.Helper()
	b.Block("low on memory")
	defer b.Unblock()
	if c.Blocked() {
		t.Fatal("the Conn was told it is blocked before it published; RabbitMQ tells nobody when an alarm is raised")
	}
}
