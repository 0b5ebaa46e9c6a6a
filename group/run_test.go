package group

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

func TestRunDrainsOnSIGTERMAndReturnsNil(t *testing.T) {
	c := connect(t, "memory://group-run")
	q := queue(t, c)
	h := newBlocking()
	defer h.open()
	g, err := Consume(context.Background(), c, q, 2, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, c, q, 1)
	eventually(t, "a handler running", func() bool { return h.started.Load() == 1 })
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), time.Minute, []Closer{g}, func() { close(ready) }) }()
	<-ready
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the drain cancelled the subscriptions", func() bool { return consumers(t, c, q) == 0 })
	h.open() // the running handler finishes within the drain
	if err := <-done; err != nil {
		t.Fatalf("Run after a drain that finished: %v", err)
	}
	if d := depth(t, c, q); d != 0 {
		t.Fatalf("the handled message is back in the queue (%d)", d)
	}
}

func TestRunSaysSoWhenTheDrainRunsOutOfTime(t *testing.T) {
	c := connect(t, "memory://group-run-timeout")
	q := queue(t, c)
	h := newBlocking()
	g, err := Consume(context.Background(), c, q, 1, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, c, q, 1)
	eventually(t, "a handler running", func() bool { return h.started.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a stop that is already asked for
	err = Run(ctx, 50*time.Millisecond, g)
	h.open()
	if !errors.Is(err, acemq.ErrDrainTimeout) || !strings.HasPrefix(err.Error(), "acemq: the shutdown drain did not finish within") {
		t.Fatalf("Run: %v", err)
	}
	// Nothing lost: the unsettled delivery went back to the queue.
	eventually(t, "the stranded delivery back in the queue", func() bool { return depth(t, c, q) == 1 })
}
