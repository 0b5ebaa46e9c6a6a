package acemq_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// The concurrency and re-subscription tests run on memory:// and RabbitMQ
// alike (onEveryRig): a broker's cancel of a consumer whose queue is
// deleted, and a forced close, look the same to the engine on both.

func TestConsumerConcurrencyRunsExactlyThatManyHandlersAtOnce(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		var mu sync.Mutex
		running, peak := 0, 0
		entered := make(chan struct{}, 20)
		barrier := make(chan struct{})
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			entered <- struct{}{}
			<-barrier
			mu.Lock()
			running--
			mu.Unlock()
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 10, Concurrency: 4})
		for range 10 {
			r.send(q, order{ID: "c"})
		}
		for range 4 {
			recv(t, entered)
		}
		// Four are in and held at the barrier; a fifth must not start while
		// they are, even though six more are prefetched.
		select {
		case <-entered:
			t.Fatal("a fifth handler started while four were running")
		case <-time.After(100 * time.Millisecond):
		}
		close(barrier)
		for range 6 {
			recv(t, entered)
		}
		for range 10 {
			if s := r.nextSettlement(); s.Outcome != acemq.ConsumeAcked {
				t.Fatalf("outcome %q", s.Outcome)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if peak != 4 {
			t.Fatalf("peak concurrency %d, want 4", peak)
		}
		r.waitReady(q, 0)
	})
}

func TestConsumerWhoseQueueIsDeletedStallsAndResumesWhenItIsBack(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		got := make(chan string, 10)
		k := consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			got <- m.Payload.ID
			return acemq.Accept()
		})
		if k.Stalled() != nil {
			t.Fatalf("a reading consumer reports stalled: %v", k.Stalled())
		}
		if _, err := r.c.DeleteQueue(context.Background(), q); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(waitLimit)
		for k.Stalled() == nil {
			if time.Now().After(deadline) {
				t.Fatal("the consumer never reported the cancelled subscription")
			}
			time.Sleep(time.Millisecond) // no event for a stall
		}
		r.queue(q)
		r.send(q, order{ID: "back"})
		if id := recv(t, got); id != "back" {
			t.Fatalf("got %q", id)
		}
		if k.Stalled() != nil {
			t.Fatalf("still stalled after reading again: %v", k.Stalled())
		}
	}, acemq.Config{RecoveryInterval: 20 * time.Millisecond, RecoveryIntervalMax: 40 * time.Millisecond})
}

// readerGoroutines counts goroutines running a consumer's read loop or
// its channel watcher.
func readerGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "acemq.(*consumerCore).read")
}

func TestRepeatedResubscriptionsDoNotLeakChannels(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		got := make(chan string, 10)
		k := consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			got <- m.Payload.ID
			return acemq.Accept()
		})
		r.send(q, order{ID: "warm"})
		recv(t, got) // the reader and its watcher are surely running now
		base := readerGoroutines()
		for range 4 {
			if _, err := r.c.DeleteQueue(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(waitLimit)
			for k.Stalled() == nil {
				if time.Now().After(deadline) {
					t.Fatal("no stall")
				}
				time.Sleep(time.Millisecond) // no event for a stall
			}
			r.queue(q)
			r.send(q, order{ID: "x"})
			recv(t, got)
		}
		deadline := time.Now().Add(waitLimit)
		for readerGoroutines() > base {
			if time.Now().After(deadline) {
				t.Fatalf("%d read goroutines after 4 re-subscriptions, %d before: the old channels were never released", readerGoroutines(), base)
			}
			time.Sleep(time.Millisecond) // goroutine exit has no event
		}
	}, acemq.Config{RecoveryInterval: 10 * time.Millisecond, RecoveryIntervalMax: 10 * time.Millisecond})
}

// logLines is a slog handler that keeps every message it is given.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.lines = append(l.lines, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// Memory only: the connection must drop within the re-subscriber's
// back-off after the broker's cancel, and RabbitMQ's close_all_connections
// takes seconds (an Erlang VM boots for each rabbitmqctl call), by which
// time the re-subscriber has rightly re-attached the consumer itself and
// said so. A loss after the cancel is covered on RabbitMQ by
// TestConsumerOfADeletedQueueResumesAfterARecoveryWithoutIt.
func TestBrokerCancelJustBeforeConnectionLossLeavesReattachingToRecovery(t *testing.T) {
	logs := &logLines{}
	events := make(chan acemq.Event, 64)
	r := newRig(t, acemq.Config{Logger: slog.New(logs), RecoveryInterval: 300 * time.Millisecond, RecoveryIntervalMax: 300 * time.Millisecond, OnEvent: func(e acemq.Event) { events <- e }})
	r.queue("q")
	got := make(chan string, 10)
	k := consume(r, "q", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		got <- m.Payload.ID
		return acemq.Accept()
	})
	// The broker cancels the subscription (here: the queue goes and comes
	// back), then closes the connection, as RabbitMQ does on stop_app.
	if _, err := r.c.DeleteQueue(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for k.Stalled() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the consumer never reported the cancelled subscription")
		}
		time.Sleep(time.Millisecond) // no event for a stall
	}
	r.queue("q")
	r.broker.DropConnections()
	for e := recv(t, events); e.Kind != acemq.EventRecovered; e = recv(t, events) {
	}
	r.send("q", order{ID: "after"})
	if id := recv(t, got); id != "after" {
		t.Fatalf("got %q", id)
	}
	if k.Stalled() != nil {
		t.Fatalf("stalled after the recovery re-attached it: %v", k.Stalled())
	}
	if info, _ := r.broker.QueueInfo("q"); info.Consumers != 1 {
		t.Fatalf("q has %d consumers after the recovery, want 1", info.Consumers)
	}
	if n := logs.count("acemq: a consumer stopped reading"); n != 0 {
		t.Fatalf("logged %d re-subscribe warnings; the connection's recovery re-attached the consumer, so nothing else may claim the job", n)
	}
}

// Two prefetch-1 consumers of one queue on two Conns share its messages,
// and a message one of them holds unacked goes to the other, flagged
// redelivered, when the first one's Conn closes.
func TestTwoConsumersShareWorkAndAnUnackedMessageGoesToTheOther(t *testing.T) {
	onEveryRig(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		a, b := r.c, r.reconnect()
		q := r.named("share")
		r.queue(q)
		var na, nb atomic.Int64
		done := make(chan struct{}, 100)
		handler := func(n *atomic.Int64) acemq.Handler[order] {
			return func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
				n.Add(1)
				time.Sleep(5 * time.Millisecond) // work, so the other consumer gets some
				done <- struct{}{}
				return acemq.Accept()
			}
		}
		ka, err := acemq.Consume(ctx, a, q, handler(&na), acemq.ConsumerConfig{Prefetch: 1})
		if err != nil {
			t.Fatal(err)
		}
		kb, err := acemq.Consume(ctx, b, q, handler(&nb), acemq.ConsumerConfig{Prefetch: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			r.send(q, order{ID: itoa(int64(i))})
		}
		for range 20 {
			recv(t, done)
		}
		if na.Load() == 0 || nb.Load() == 0 || na.Load()+nb.Load() != 20 {
			t.Fatalf("prefetch-1 consumers did not share 20 messages: %d and %d", na.Load(), nb.Load())
		}
		if err := ka.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := kb.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// An unacked message goes back when its consumer's channel closes.
		q2 := r.named("redeliver")
		r.queue(q2)
		held := make(chan acemq.Envelope, 1)
		release := make(chan struct{})
		defer close(release)
		if _, err := acemq.Consume(ctx, a, q2, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			held <- m.Envelope
			<-release
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 1}); err != nil {
			t.Fatal(err)
		}
		sent, err := acemq.NewPublisher[order](b, "", q2, acemq.PublisherConfig{}).Send(ctx, order{ID: "held"})
		if err != nil {
			t.Fatal(err)
		}
		if e := recv(t, held); e.ID != sent.Envelope.ID {
			t.Fatalf("held %s, want %s", e.ID, sent.Envelope.ID)
		}
		type got struct {
			env         acemq.Envelope
			redelivered bool
		}
		gotB := make(chan got, 1)
		if _, err := acemq.Consume(ctx, b, q2, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			gotB <- got{m.Envelope, m.Redelivered}
			return acemq.Accept()
		}, acemq.ConsumerConfig{Prefetch: 1}); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_ = a.Close(cctx)
		if g := recv(t, gotB); g.env.ID != sent.Envelope.ID || !g.redelivered {
			t.Fatalf("second consumer got %s redelivered=%v, want %s redelivered", g.env.ID, g.redelivered, sent.Envelope.ID)
		}
	})
}
