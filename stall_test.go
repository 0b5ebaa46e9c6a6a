package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/stallbroker"
)

// A broker that stops reading (internal/stallbroker: at the first publish
// on a connection, with a small receive buffer), so the client's socket
// buffers fill and the write of a large message blocks, as against a
// broker whose process was stopped. docs/guarantees.md, "Shutdown is
// bounded"; the stall drill (acemq drill stall) does the same against a
// RabbitMQ node stopped with SIGSTOP.

// stallSlack is how far past its deadline a call may return on a loaded
// two-core machine: scheduling, not a wait. Without the bounds these calls
// return only when the connection is dropped for silence (20 s at the
// default heartbeat), or never.
const stallSlack = 1500 * time.Millisecond

// A Send whose write blocks returns at its deadline, saying the message may
// have arrived (part of it is on the wire); the connection it was written
// on is closed (the stream is no longer framed) and the Conn recovers. On
// both frame writers.
func TestASendTheBrokerStopsReadingReturnsAtItsDeadlineAndTheConnRecovers(t *testing.T) {
	for _, frames := range []string{"native", "amqp091"} {
		t.Run(frames, func(t *testing.T) {
			b := stallbroker.Start(t)
			events := make(chan acemq.Event, 64)
			c, err := acemq.Connect(context.Background(), b.URL()+"?frames="+frames, acemq.Config{
				Logger:  slog.New(slog.DiscardHandler),
				OnEvent: func(e acemq.Event) { events <- e },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer closeWithin(t, c, time.Second)
			pub := acemq.NewPublisher[[]byte](c, "", "q", acemq.PublisherConfig{Codec: acemq.Bytes()})

			const deadline = 2 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			begun := time.Now()
			_, err = pub.Send(ctx, make([]byte, 8<<20))
			took := time.Since(begun)
			t.Logf("Send returned after %s: %v", took.Round(time.Millisecond), err)
			if took > deadline+stallSlack {
				t.Fatalf("Send returned after %s; its deadline was %s", took.Round(time.Millisecond), deadline)
			}
			select {
			case <-b.Stalled():
			default:
				t.Fatalf("the broker never saw the publish within the Send's %s (%v)", deadline, err)
			}
			var pe *acemq.PublishError
			if !errors.As(err, &pe) || !pe.Sent || !strings.Contains(err.Error(), "may have arrived") {
				t.Fatalf("Send = %v; want a PublishError saying it may have arrived", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Send = %v; want it to wrap the context's error", err)
			}
			for e := recv(t, events); e.Kind != acemq.EventRecovered; e = recv(t, events) {
			}
			// The recovered Conn writes again (the stall broker confirms
			// nothing, so the Send itself ends with its context).
			sctx, scancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer scancel()
			_, _ = pub.Send(sctx, []byte("small"))
			select {
			case <-b.Stalled():
			case <-time.After(30 * time.Second):
				t.Fatal("the recovered Conn did not write the next publish")
			}
		})
	}
}

// Close returns within its context while a Send with no deadline of its
// own is blocked in its write, and that Send returns with it.
func TestCloseReturnsWithinItsContextWhileASendIsBlockedInItsWrite(t *testing.T) {
	for _, frames := range []string{"native", "amqp091"} {
		t.Run(frames, func(t *testing.T) {
			b := stallbroker.Start(t)
			c, err := acemq.Connect(context.Background(), b.URL()+"?frames="+frames, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			pub := acemq.NewPublisher[[]byte](c, "", "q", acemq.PublisherConfig{Codec: acemq.Bytes()})
			sent := make(chan error, 1)
			go func() {
				_, err := pub.Send(context.Background(), make([]byte, 8<<20))
				sent <- err
			}()
			select {
			case <-b.Stalled(): // the Send is inside its write, which blocks
			case <-time.After(30 * time.Second):
				t.Fatal("the broker never saw the publish")
			}
			const bound = 500 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			begun := time.Now()
			_ = c.Close(ctx)
			took := time.Since(begun)
			t.Logf("Close returned after %s", took.Round(time.Millisecond))
			if took > bound+stallSlack {
				t.Fatalf("Close took %s with a Send blocked in its write; its context allowed %s", took.Round(time.Millisecond), bound)
			}
			select {
			case err := <-sent:
				if err == nil {
					t.Fatal("the blocked Send was answered confirmed")
				}
			case <-time.After(stallSlack):
				t.Fatal("the blocked Send had not returned after Close")
			}
		})
	}
}

// closeWithin closes c with a deadline of d and fails the test when that
// does not hold.
func closeWithin(t *testing.T, c *acemq.Conn, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	begun := time.Now()
	_ = c.Close(ctx)
	if took := time.Since(begun); took > d+stallSlack {
		t.Errorf("Close took %s; its context allowed %s", took.Round(time.Millisecond), d)
	}
}
