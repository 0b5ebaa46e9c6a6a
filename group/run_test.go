package group

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

func TestRunDrainsOnSIGTERMAndReturnsNil(t *testing.T) {
	c := brokertest.Connect(t, "memory://group-run")
	q := brokertest.Queue(t, c, "group")
	h := newBlocking()
	defer h.open()
	g, err := Consume(context.Background(), c, q, 2, h.handle, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Publish(t, c, q, 1)
	brokertest.Eventually(t, "a handler running", func() bool { return h.started.Load() == 1 })
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), time.Minute, []Closer{g}, func() { close(ready) }) }()
	<-ready
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, "the drain cancelled the subscriptions", func() bool { return brokertest.Consumers(t, c, q) == 0 })
	h.open() // the running handler finishes within the drain
	if err := <-done; err != nil {
		t.Fatalf("Run after a drain that finished: %v", err)
	}
	if d := brokertest.Depth(t, c, q); d != 0 {
		t.Fatalf("the handled message is back in the queue (%d)", d)
	}
}

func TestRunSaysSoWhenTheDrainRunsOutOfTime(t *testing.T) {
	c := brokertest.Connect(t, "memory://group-run-timeout")
	q := brokertest.Queue(t, c, "group")
	h := newBlocking()
	g, err := Consume(context.Background(), c, q, 1, h.handle, acemq.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Publish(t, c, q, 1)
	brokertest.Eventually(t, "a handler running", func() bool { return h.started.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a stop that is already asked for
	err = Run(ctx, 50*time.Millisecond, g)
	h.open()
	if !errors.Is(err, acemq.ErrDrainTimeout) || !strings.HasPrefix(err.Error(), "acemq: the shutdown drain did not finish within") {
		t.Fatalf("Run: %v", err)
	}
	// Nothing lost: the unsettled delivery went back to the queue.
	brokertest.Eventually(t, "the stranded delivery back in the queue", func() bool { return brokertest.Depth(t, c, q) == 1 })
}
