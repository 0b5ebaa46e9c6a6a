package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every
// Conn and Consumer a test opens is closed, and a Close must stop all it
// started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCloseLeavesNoGoroutinesEvenAfterARecovery(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	events := make(chan acemq.Event, 64)
	r := newRig(t, acemq.Config{RecoveryInterval: 50 * time.Millisecond, RecoveryIntervalMax: 50 * time.Millisecond, OnEvent: func(e acemq.Event) { events <- e }})
	r.queue("q")
	k, err := acemq.Consume(context.Background(), r.c, "q", func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
		if m.Payload.ID == "retry" && m.Envelope.Attempt == 1 {
			return acemq.Retry(errors.New("again"))
		}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Retry: acemq.Fixed(2, time.Millisecond), Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	r.send("q", order{ID: "ok"})
	r.send("q", order{ID: "retry"})
	for range 3 {
		r.nextSettlement()
	}
	r.broker.DropConnections()
	for e := recv(t, events); e.Kind != acemq.EventRecovered; e = recv(t, events) {
	}
	r.send("q", order{ID: "after"})
	r.nextSettlement()
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeOnAMissingQueueFailsAndLeavesNoGoroutines(t *testing.T) {
	r := newRig(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, err := acemq.Consume(context.Background(), r.c, "absent", func(context.Context, *acemq.Message[order]) acemq.Decision {
		return acemq.Accept()
	}, acemq.ConsumerConfig{Concurrency: 2})
	if err == nil || !strings.Contains(err.Error(), `acemq: cannot start consumer on "absent": the queue does not exist; declare it first`) {
		t.Fatalf("Consume = %v", err)
	}
}
