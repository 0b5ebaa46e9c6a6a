// Command replay shows a dead-letter replay: a consumer rejects ten orders
// because of a bug, the bug is "fixed", and replay moves the orders back,
// skipping one an operator wants to keep aside. It runs on the in-process
// broker; -url runs it against RabbitMQ. It exits 0 only if every number
// is right.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

type order struct {
	N int `json:"n"`
}

func main() {
	url := flag.String("url", "memory://example-replay", "broker URL (memory://name or amqp://…)")
	mgmt := flag.String("management", os.Getenv("ACEMQ_MANAGEMENT_URL"), "RabbitMQ management URL (http://user:pass@host:15672/): a replay that skips messages first asks it whether handing them back would count toward a delivery limit")
	flag.Parse()
	if err := run(*url, *mgmt); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url, mgmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rejected := make(chan struct{}, 16)
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler), OnSettlement: func(s acemq.Settlement) {
		if s.Outcome == acemq.ConsumeRejected {
			rejected <- struct{}{}
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	q := fmt.Sprintf("example.orders.%d", time.Now().UnixNano())
	dlq := acemq.DeadLetterQueue(q)
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q)); err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{q, dlq, acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	}()

	// The buggy release: every order is rejected to the DLQ.
	buggy, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		return acemq.Reject(errors.New("bug #42: the tax table is empty"))
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	pub := acemq.NewPublisher[order](c, "", q, acemq.PublisherConfig{})
	var keepAside string
	for i := range 10 {
		s, err := pub.Send(ctx, order{N: i})
		if err != nil {
			return err
		}
		if i == 3 {
			keepAside = s.Envelope.ID
		}
	}
	for range 10 {
		select {
		case <-rejected:
		case <-ctx.Done():
			return errors.New("the buggy consumer did not reject all ten orders")
		}
	}
	// Closing drains: every rejection has landed in the DLQ when it returns.
	if err := buggy.Close(ctx); err != nil {
		return err
	}
	if info, err := c.QueueInfo(ctx, dlq); err != nil || info.Messages != 10 {
		return fmt.Errorf("want 10 orders in %s, found %d (%v)", dlq, info.Messages, err)
	}
	fmt.Printf("10 orders rejected into %s\n", dlq)

	// The skipped order goes back to the DLQ: on RabbitMQ the replay first
	// asks the management API whether that would count toward a delivery
	// limit (a quorum queue with one, before RabbitMQ 4.3), and refuses if
	// so or if it cannot tell.
	rep, err := replay.Queue(ctx, c, dlq, replay.Filter(func(e acemq.Envelope, _ []byte) bool {
		return e.ID != keepAside
	}), replay.ManagementAPI(mgmt, "/"))
	if err != nil {
		return err
	}
	fmt.Printf("replay: %s\n", rep)
	if rep.Moved != 9 || rep.Skipped != 1 || rep.Reason != replay.Drained {
		return fmt.Errorf("want moved 9, skipped 1 (drained), got %s", rep)
	}
	// The fixed release.
	handled := make(chan acemq.Envelope, 16)
	fixed, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[order]) acemq.Decision {
		handled <- m.Envelope
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}
	defer fixed.Close(context.Background())
	for range 9 {
		select {
		case e := <-handled:
			if e.Attempt != 1 || acemq.ReplayCount(e) != 1 {
				return fmt.Errorf("replayed order %s: attempt %d, replay count %d", e.ID, e.Attempt, acemq.ReplayCount(e))
			}
		case <-ctx.Done():
			return errors.New("the replayed orders were not all handled")
		}
	}
	fmt.Println("9 replayed orders handled on attempt 1, replay count 1")
	info, err := c.QueueInfo(ctx, dlq)
	if err != nil {
		return err
	}
	fmt.Printf("%s still holds %d order(s) kept aside\n", dlq, info.Messages)
	if info.Messages != 1 {
		return fmt.Errorf("want 1 order left in %s, found %d", dlq, info.Messages)
	}
	fmt.Println("OK")
	return nil
}
