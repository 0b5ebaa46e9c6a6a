package schedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/acemqtest"
	"github.com/acemq-go/acemq/schedule"
)

// TestEveryRungDeliversOnTimeInVirtualTime schedules messages whose waits
// use every rung, up to two and a half hours ahead, and checks each
// arrives once, no more than a second early and never late (to the
// millisecond of its due time), with its
// content type and without the scheduler's headers. In real time it would
// take the two and a half hours; under acemqtest it takes milliseconds.
func TestEveryRungDeliversOnTimeInVirtualTime(t *testing.T) {
	topo := acemq.NewTopology().Queue("reminders", acemq.QueueOptions{})
	acemqtest.Run(t, acemqtest.Config{Topology: topo}, func(t *testing.T, h *acemqtest.Harness) {
		if err := h.Conn().Apply(t.Context(), schedule.Topology()); err != nil {
			t.Fatal(err)
		}
		s, err := schedule.Start(t.Context(), h.Conn())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		if _, err := acemq.Consume(t.Context(), h.Conn(), "reminders", func(ctx context.Context, m *acemq.Message[string]) acemq.Decision {
			return acemq.Accept()
		}, acemq.ConsumerConfig{Codec: acemq.Text()}); err != nil {
			t.Fatal(err)
		}
		waits := []time.Duration{0, 700 * time.Millisecond, 5 * time.Second, 42 * time.Second, 9*time.Minute + 59*time.Second, 47 * time.Minute, 2*time.Hour + 30*time.Minute + 1500*time.Millisecond}
		start := h.Now()
		due := map[string]time.Time{}
		for _, d := range waits {
			body := fmt.Sprintf("in %s", d)
			due[body] = start.Add(d).Truncate(time.Millisecond)
			if err := schedule.At(t.Context(), h.Conn(), "", "reminders", body, start.Add(d), schedule.WithCodec(acemq.Text())); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Settle(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.Expect(t, acemqtest.Scheduled, len(waits)-2) // less than a second ahead goes at once
		arrived := h.Expect(t, acemqtest.Acked, len(waits), acemqtest.Queue("reminders"))
		for _, r := range arrived {
			want, ok := due[string(r.Body)]
			if !ok {
				t.Fatalf("an unexpected message %q", r.Body)
			}
			delete(due, string(r.Body))
			// Due times are whole milliseconds; each rung's expiry comes a
			// nanosecond after its TTL.
			if early := want.Sub(r.At); early < -time.Millisecond || early > time.Second {
				t.Errorf("%s arrived %s before its due time; the ladder is never late and at most a second early", r.Body, early)
			}
			if r.ContentType != "text/plain; charset=utf-8" || r.Envelope.Type != schedule.MessageType {
				t.Errorf("%s: content type %q, type %q", r.Body, r.ContentType, r.Envelope.Type)
			}
			for name := range r.Envelope.Headers() {
				if strings.HasPrefix(name, "x-schedule-") {
					t.Errorf("%s arrived with the scheduler's header %s", r.Body, name)
				}
			}
		}
		if took := h.Now().Sub(start); took < waits[len(waits)-1]-time.Second {
			t.Errorf("settled after %s of virtual time, before the last message was due", took)
		}
	})
}
