// Package alarmtest raises a resource alarm on the in-process broker the
// way RabbitMQ delivers one, for tests of code above the engine: no
// connection is told until it publishes, and that publish is held.
package alarmtest

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

// waitLimit bounds every wait here.
const waitLimit = 10 * time.Second

// BlockAndWait raises b's resource alarm with reason, publishes once on c
// (a raw, not mandatory publish to a key no queue has; raw publishes do not
// count in Stats), which the broker holds unconfirmed, and waits until c
// reports Blocked with reason. The held publish's result arrives on the
// returned channel once the broker unblocks (or at c's confirm timeout). At
// cleanup the publish is abandoned and its goroutine waited for.
func BlockAndWait(t testing.TB, c *acemq.Conn, b *memory.Broker, reason string) <-chan error {
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
		case <-time.After(time.Millisecond): // no event for "told blocked" other than the state
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Conn was not told it is blocked within %s of publishing during the alarm", waitLimit)
		}
	}
	if got := c.Health(context.Background()).BlockedReason; got != reason {
		t.Fatalf("BlockedReason %q, want %q", got, reason)
	}
	select {
	case err := <-held:
		t.Fatalf("the publish written during the alarm was answered (%v) while blocked", err)
	default:
	}
	return held
}

// HeldConfirms waits for the publish BlockAndWait left held to be
// confirmed, once the broker has unblocked.
func HeldConfirms(t testing.TB, held <-chan error) {
	t.Helper()
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("the publish held during the alarm, after unblock: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the publish held during the alarm was not confirmed after unblock")
	}
}
