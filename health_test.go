package acemq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/alarmtest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

func connectMemory(t *testing.T, name string) *acemq.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://"+name, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	return c
}

func TestHealthIsUpWhenOpen(t *testing.T) {
	c := connectMemory(t, "health-up")
	r := c.Health(context.Background())
	if r.Status != acemq.StatusUp || !r.Open || r.Blocked || r.Detail != "" || r.Transport != "memory" {
		t.Fatalf("report %+v", r)
	}
}

func TestHealthIsUpWithTheReasonWhenBlocked(t *testing.T) {
	c := connectMemory(t, "health-blocked")
	b := memory.Lookup("health-blocked")
	held := alarmtest.BlockAndWait(t, c, b, "low on memory")
	start := time.Now()
	r := c.Health(context.Background())
	t.Logf("Health answered in %s while blocked", time.Since(start))
	if r.Status != acemq.StatusUp || !r.Blocked || r.BlockedReason != "low on memory" {
		t.Fatalf("report %+v", r)
	}
	if want := "the broker has blocked this connection; publishing is paused: low on memory"; r.Detail != want {
		t.Fatalf("detail %q, want %q", r.Detail, want)
	}
	b.Unblock()
	if err := recv(t, held); err != nil {
		t.Fatalf("the publish held during the alarm, after unblock: %v", err)
	}
	if r := c.Health(context.Background()); r.Status != acemq.StatusUp || r.Blocked || r.Detail != "" {
		t.Fatalf("report after unblock %+v", r)
	}
}

func TestHealthIsDownWhenClosed(t *testing.T) {
	c := connectMemory(t, "health-closed")
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := c.Health(context.Background())
	if r.Status != acemq.StatusDown || r.Open || r.Detail != "the connection has been closed" {
		t.Fatalf("report %+v", r)
	}
}

func TestHealthIsDownWhileRecovering(t *testing.T) {
	ctx := context.Background()
	lost := make(chan struct{}, 1)
	c, err := acemq.Connect(ctx, "memory://health-lost", acemq.Config{Logger: slog.New(slog.DiscardHandler), RecoveryInterval: time.Hour, RecoveryIntervalMax: time.Hour, OnEvent: func(e acemq.Event) {
		if e.Kind == acemq.EventLost {
			select {
			case lost <- struct{}{}:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	memory.Lookup("health-lost").DropConnections()
	<-lost
	r := c.Health(ctx)
	if r.Status != acemq.StatusDown || !r.Recovering || r.Detail != "the connection has been lost and is being recovered" {
		t.Fatalf("report %+v", r)
	}
}

// The same situation reports the same on memory:// and on RabbitMQ, 3.10 and
// 4.0 alike (make test runs the RabbitMQ half on both).
func TestHealthIsDegradedWhenAConsumerStopsReading(t *testing.T) {
	onEveryTransport(t, func(t *testing.T, e *engine) {
		ctx := context.Background()
		c := e.c
		if r := c.Health(ctx); r.Status != acemq.StatusUp || !r.Open || r.Detail != "" || r.Transport != e.name {
			t.Fatalf("report before %+v", r)
		}
		q := e.unique("health.q1")
		if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic})); err != nil {
			t.Fatal(err)
		}
		cons, err := acemq.Consume(ctx, c, q, func(context.Context, *acemq.Message[order2]) acemq.Decision { return acemq.Accept() }, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		if _, err := c.DeleteQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
		// The broker's cancel arrives asynchronously; wait for the state, bounded.
		deadline := time.Now().Add(5 * time.Second)
		var r acemq.HealthReport
		for {
			if r = c.Health(ctx); r.Status == acemq.StatusDegraded || time.Now().After(deadline) {
				break
			}
			<-time.After(time.Millisecond)
		}
		if r.Status != acemq.StatusDegraded || r.Detail != "these consumers have stopped reading: "+q || !r.Open {
			t.Fatalf("report %+v", r)
		}
	})
}

func TestCheckAllSilentCheckIsDownAfterTheDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	silent := acemq.CheckFunc("silent", func(context.Context) acemq.HealthReport {
		<-release // ignores ctx on purpose
		return acemq.HealthReport{Status: acemq.StatusUp}
	})
	start := time.Now()
	r := acemq.CheckAll(context.Background(), 50*time.Millisecond, silent)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("CheckAll took %s", took)
	}
	if r.Status != acemq.StatusDown || r.Detail != "silent: the check did not answer within 50ms" {
		t.Fatalf("report %+v", r)
	}
}

func TestCheckAllDefaultDeadlineSentence(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller's deadline ends it at once; the sentence names the configured bound
	release := make(chan struct{})
	defer close(release)
	r := acemq.CheckAll(ctx, 0, acemq.CheckFunc("slow", func(context.Context) acemq.HealthReport {
		<-release
		return acemq.HealthReport{}
	}))
	if r.Parts["slow"].Detail != "the check did not answer within 5s" {
		t.Fatalf("detail %q", r.Parts["slow"].Detail)
	}
}

func TestCheckAllWorstWinsAndKeepsEveryDetail(t *testing.T) {
	c := connectMemory(t, "health-agg")
	b := memory.Lookup("health-agg")
	alarmtest.BlockAndWait(t, c, b, "low on memory")
	defer b.Unblock()
	r := acemq.CheckAll(context.Background(), time.Second,
		acemq.CheckFunc("acemq", c.Health),
		acemq.CheckFunc("db", func(context.Context) acemq.HealthReport {
			return acemq.HealthReport{Status: acemq.StatusDegraded, Detail: "replica lag"}
		}),
		acemq.CheckFunc("boom", func(context.Context) acemq.HealthReport { panic("kaput") }),
		acemq.CheckFunc("fine", func(context.Context) acemq.HealthReport { return acemq.HealthReport{Status: acemq.StatusUp} }),
	)
	if r.Status != acemq.StatusDown {
		t.Fatalf("status %s, want DOWN (a panic)", r.Status)
	}
	want := "acemq: the broker has blocked this connection; publishing is paused: low on memory; db: replica lag; boom: the check panicked: kaput"
	if r.Detail != want {
		t.Fatalf("detail\n%q\nwant\n%q", r.Detail, want)
	}
	if len(r.Parts) != 4 || r.Parts["acemq"].Status != acemq.StatusUp || r.Parts["fine"].Status != acemq.StatusUp {
		t.Fatalf("parts %+v", r.Parts)
	}
	if r := acemq.CheckAll(context.Background(), time.Second); r.Status != acemq.StatusUp {
		t.Fatalf("no checks: %s, want UP", r.Status)
	}
}

func TestHealthAnswersInMicroseconds(t *testing.T) {
	c := connectMemory(t, "health-fast")
	start := time.Now()
	const n = 1000
	for i := 0; i < n; i++ {
		_ = c.Health(context.Background())
	}
	per := time.Since(start) / n
	t.Logf("Health: %s per call", per)
	if per > time.Millisecond {
		t.Fatalf("Health took %s per call; it must read local state only", per)
	}
}
