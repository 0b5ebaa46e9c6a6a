// Command stream replays an order history kept in a stream into a read
// model: a reader starts at the first event and folds each into a table of
// orders, checkpointing as it goes; started again later with the same
// checkpoint store, it applies only the events that came since. It runs on
// the in-process broker with nothing set up; -url runs it against
// RabbitMQ. It exits 0 only if the read model matches the history and the
// second run read nothing twice.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream"
)

// orderEvent is one fact in the order history.
type orderEvent struct {
	Order string `json:"order"`
	Kind  string `json:"kind"` // placed, paid, shipped, cancelled
	Total int    `json:"total,omitempty"`
}

// orderRow is one row of the read model.
type orderRow struct {
	Status string
	Total  int
}

// model is the read model: orders by id, and how many events it applied.
type model struct {
	mu      sync.Mutex
	orders  map[string]orderRow
	applied int
}

func (m *model) apply(e orderEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row := m.orders[e.Order]
	if e.Kind == "placed" {
		row.Total = e.Total
	}
	row.Status = e.Kind
	m.orders[e.Order] = row
	m.applied++
}

func main() {
	url := flag.String("url", "memory://example-stream", "broker URL (memory://name or amqp://…)")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	history := fmt.Sprintf("example-orders-history-%d", time.Now().UnixNano())
	if err := c.Apply(ctx, acemq.NewTopology().Queue(history, acemq.QueueOptions{Type: acemq.Stream, MaxAge: time.Hour})); err != nil {
		return err
	}
	defer func() {
		for _, n := range []string{history, acemq.DeadLetterQueue(history), acemq.ParkedQueue(history)} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	}()

	events := []orderEvent{
		{"o-1", "placed", 30}, {"o-2", "placed", 12}, {"o-1", "paid", 0}, {"o-3", "placed", 58},
		{"o-2", "cancelled", 0}, {"o-1", "shipped", 0}, {"o-4", "placed", 7}, {"o-3", "paid", 0},
	}
	later := []orderEvent{{"o-4", "paid", 0}, {"o-3", "shipped", 0}, {"o-5", "placed", 21}}
	if err := publish(ctx, c, history, events); err != nil {
		return err
	}

	// The checkpoint store outlives the reader; in production it is
	// stream.NewSQLCheckpoints on the read model's own database.
	store := &stream.MemoryCheckpoints{}
	rm := &model{orders: map[string]orderRow{}}
	if err := replay(ctx, c, history, rm, store, stream.From(stream.First())); err != nil {
		return err
	}
	fmt.Printf("first run: applied %d events from the first offset\n", rm.applied)
	if rm.applied != len(events) {
		return fmt.Errorf("the first run applied %d events, want %d", rm.applied, len(events))
	}

	// More history arrives while the read model is offline; the restarted
	// reader resumes after its checkpoint.
	if err := publish(ctx, c, history, later); err != nil {
		return err
	}
	before := rm.applied
	if err := replay(ctx, c, history, rm, store); err != nil {
		return err
	}
	fmt.Printf("second run: applied %d events after the checkpoint\n", rm.applied-before)
	if rm.applied-before != len(later) {
		return fmt.Errorf("the second run applied %d events, want only the %d new ones", rm.applied-before, len(later))
	}

	want := &model{orders: map[string]orderRow{}}
	for _, e := range append(events, later...) {
		want.apply(e)
	}
	for _, id := range slices.Sorted(maps.Keys(rm.orders)) {
		row := rm.orders[id]
		fmt.Printf("  %s  %-9s %3d\n", id, row.Status, row.Total)
	}
	if !maps.Equal(rm.orders, want.orders) {
		return fmt.Errorf("the read model %v does not match the history %v", rm.orders, want.orders)
	}
	fmt.Println("read model matches the history")
	return nil
}

func publish(ctx context.Context, c *acemq.Conn, history string, events []orderEvent) error {
	for _, e := range events {
		if _, err := c.Publish(ctx, "", history, e, acemq.SendOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// replay runs the read-model reader until it has handled the stream's
// newest offset, then closes it (which saves the checkpoint).
func replay(ctx context.Context, c *acemq.Conn, history string, rm *model, store stream.CheckpointStore, opts ...stream.Option) error {
	end, err := stream.Probe(ctx, c, history)
	if err != nil {
		return err
	}
	caughtUp := make(chan struct{})
	var once sync.Once
	r, err := stream.Read(ctx, c, history, "orders-read-model", func(_ context.Context, m *stream.Message[orderEvent]) acemq.Decision {
		rm.apply(m.Payload)
		if m.Offset >= end.Last {
			once.Do(func() { close(caughtUp) })
		}
		return acemq.Accept()
	}, append(opts, stream.Checkpoint(store, 5, time.Second))...)
	if err != nil {
		return err
	}
	select {
	case <-caughtUp:
	case <-ctx.Done():
		_ = r.Close(context.Background())
		return fmt.Errorf("the reader did not reach offset %d: %w", end.Last, ctx.Err())
	}
	lag, _ := r.ProbeLag(ctx)
	fmt.Printf("caught up at offset %d (%d behind)\n", lag.Handled, lag.Behind)
	return r.Close(ctx)
}
