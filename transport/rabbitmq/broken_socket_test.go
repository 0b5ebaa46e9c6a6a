package rabbitmq

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// A socket that breaks while confirmed publishes are in flight fails those
// publishes: each one either returns an error from Publish or is answered
// Lost (none is left unanswered, none is answered Acked after the break
// without the broker), and publishing after the break returns an error.
func TestBrokenSocketFailsThePublishesItConcerns(t *testing.T) {
	px, c, q := dialThroughBreakableProxy(t, "coalesce-break")
	p := openPublisher(t, c)

	var mu sync.Mutex
	answers := map[transport.Outcome]int{}
	var answered sync.WaitGroup
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256)}
	ctx := context.Background()
	written, acked := 0, atomic.Int32{}
	afterMute := 0
	var pubErr error
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		// Break the socket with publishes in flight: from 200 confirms on,
		// the broker's answers are dropped, so the next 20 publishes can
		// only end Lost (on a loaded machine each publish may otherwise be
		// confirmed before the next), then the socket breaks.
		if acked.Load() >= 200 && px.Mute() {
			afterMute++
			if afterMute > 20 {
				px.Kill()
			}
		}
		answered.Add(1)
		err := p.Publish(ctx, msg, func(cf transport.Confirmation) {
			mu.Lock()
			answers[cf.Outcome]++
			mu.Unlock()
			if cf.Outcome == transport.Acked {
				acked.Add(1)
			}
			answered.Done()
		})
		if err != nil {
			pubErr = err
			if errors.Is(err, transport.ErrNotWritten) {
				answered.Done() // nothing written: done is not called
			} else {
				written++ // bytes may have gone: done is called, Lost
			}
			break
		}
		written++
	}
	if pubErr == nil {
		t.Fatalf("publishing went on for %v after the socket broke without an error", wait)
	}
	done := make(chan struct{})
	go func() { answered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("some of %d written publishes were never answered: %v", written, answers)
	}
	mu.Lock()
	defer mu.Unlock()
	if answers[transport.Acked]+answers[transport.Lost] != written || answers[transport.Lost] == 0 {
		t.Fatalf("%d written publishes answered %v; want each Acked or Lost, some Lost", written, answers)
	}
}

// dialThroughBreakableProxy makes a temporary queue named after name (on a
// direct connection) and returns a proxy to the test broker with a
// connection dialled through it.
func dialThroughBreakableProxy(t *testing.T, name string) (*testenv.Proxy, transport.Connection, string) {
	t.Helper()
	url := testenv.AMQPURL(t)
	px, via := testenv.StartProxy(t, url)
	direct := dial(t, transport.Config{URL: url})
	q := tempQueue(t, direct, name, nil)
	return px, dial(t, transport.Config{URL: via}), q
}

// A channel whose close the broker never answers (RabbitMQ 4.0 on a stream
// after a network partition: the connection still heartbeats, channel.close
// waits for ever) does not hold Close: after channelCloseWait it ends the
// connection, so a Conn recovers it, and says why.
func TestChannelCloseTheBrokerNeverAnswersEndsTheConnection(t *testing.T) {
	px, c, _ := dialThroughBreakableProxy(t, "close-unanswered")
	ch, err := c.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := channelCloseWait
	channelCloseWait = 200 * time.Millisecond
	t.Cleanup(func() { channelCloseWait = old })
	px.Mute()
	closed := make(chan error, 1)
	go func() { closed <- ch.Close() }()
	select {
	case err = <-closed:
	case <-time.After(wait):
		t.Fatalf("Close still waiting %s after the broker went silent (bound %s)", wait, channelCloseWait)
	}
	if err == nil || !strings.Contains(err.Error(), "did not answer channel.close within 200ms") {
		t.Fatalf("Close = %v, want the unanswered close named", err)
	}
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("the connection did not end after the unanswered channel.close")
	}
	if e := c.Err(); e == nil || !strings.Contains(e.Error(), "channel.close") {
		t.Fatalf("connection Err = %v, want the unanswered close as the reason", e)
	}
}
