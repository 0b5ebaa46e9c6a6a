package acemq_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// lockedBuffer is a bytes.Buffer a logger may write from several
// goroutines while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// A retry's settlement and its log line carry the handler's reason, as a
// set-aside's do: an operator reading "outcome=retried" learns why
// (they said reason="").
func TestARetryIsLoggedAndSettledWithTheHandlersReason(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	onEveryRig(t, func(t *testing.T, r *rig) {
		q := r.named("q")
		r.queue(q)
		consume(r, q, func(ctx context.Context, m *acemq.Message[order]) acemq.Decision {
			return acemq.Retry(errors.New("payments are down"))
		}, acemq.ConsumerConfig{Retry: acemq.Exponential(2, 10*time.Millisecond, 0)})
		sent := r.send(q, order{ID: "why"})

		s := r.nextSettlement()
		if s.Outcome != acemq.ConsumeRetried || s.Reason != "payments are down" {
			t.Fatalf("first settlement %+v, want retried with reason %q", s, "payments are down")
		}
		if last := r.nextSettlement(); last.Outcome != acemq.ConsumeDeadLettered || last.Reason != "exhausted 2 attempts: payments are down" {
			t.Fatalf("last settlement %+v, want dead_lettered, exhausted 2 attempts: payments are down", last)
		}
		want := `id=` + sent.Envelope.ID + ` outcome=retried target=` + q + ` reason="payments are down"`
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line with %s in:\n%s", want, logs.String())
		}
	}, acemq.Config{Logger: logger})
}
