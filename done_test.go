package acemq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

func isDone(c *acemq.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// Done stays open while the Conn is open or recovering and closes once
// Close has drained.
func TestDoneClosesWhenTheConnIsClosedNotWhenItRecovers(t *testing.T) {
	const name = "done-close"
	recovered := make(chan struct{}, 1)
	c, err := acemq.Connect(context.Background(), "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler), RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 50 * time.Millisecond, OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventRecovered {
			select {
			case recovered <- struct{}{}:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	if isDone(c) {
		t.Fatal("Done is closed on an open Conn")
	}
	memory.Lookup(name).DropConnections()
	select {
	case <-recovered:
	case <-time.After(10 * time.Second):
		t.Fatal("no recovery within 10s")
	}
	if isDone(c) {
		t.Fatal("Done closed across a recovery")
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isDone(c) {
		t.Fatal("Done is still open after Close returned")
	}
}
