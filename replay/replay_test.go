package replay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
	"github.com/acemq-go/acemq/transport/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type job struct {
	N int `json:"n"`
}

func memName(t *testing.T) string { return strings.ReplaceAll(t.Name(), "/", "-") }

var brokers = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"memory", func(t *testing.T) string { return "memory://" + memName(t) }},
	{"rabbitmq", func(t *testing.T) string { return testenv.AMQPURL(t) }},
}

// manage names the test node's management API for c's reads (a memory://
// Conn needs none), so Browse can tell what a read does to the queue.
func manage(c *acemq.Conn) replay.Option {
	return replay.ManagementAPI(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL"), "/")
}

func forEachBroker(t *testing.T, body func(t *testing.T, url string)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) { body(t, b.url(t)) })
	}
}

func connect(t *testing.T, url string, opts ...acemq.Config) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, brokertest.Overlay(acemq.Config{Logger: slog.New(slog.DiscardHandler)}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// setup declares q with its dead-letter half and puts n dead-lettered
// messages (attempt 3, with an error) in q.dlq. It returns q and the ids.
func setup(t *testing.T, c *acemq.Conn, n int) (string, []string) {
	t.Helper()
	ctx := context.Background()
	q := testenv.Unique("replay.jobs")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Classic}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
	})
	ids := make([]string, n)
	for i := range n {
		env := acemq.NewEnvelope()
		env.Attempt = 3
		env.Error = "exhausted 3 attempts: boom"
		env.FirstSeen = env.FirstSeen.Add(-time.Hour)
		env, _ = env.WithHeader("x-test-keep", "yes")
		if _, err := c.Publish(ctx, "", acemq.DeadLetterQueue(q), job{N: i}, acemq.SendOptions{Envelope: &env}); err != nil {
			t.Fatal(err)
		}
		ids[i] = env.ID
	}
	return q, ids
}

// drain pulls every message in queue, acking them, and returns them.
func drain(t *testing.T, c *acemq.Conn, queue string) []*acemq.Pulled {
	t.Helper()
	ctx := context.Background()
	p, err := c.NewPuller(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var out []*acemq.Pulled
	for {
		m, ok, err := p.Pull(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
}

func count(t *testing.T, c *acemq.Conn, queue string) int {
	t.Helper()
	info, err := c.QueueInfo(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

func TestReplayResetsAttemptsClearsTheErrorAndStamps(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 3)
		before := time.Now().Add(-time.Second)
		rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), manage(c))
		if err != nil || rep.Moved != 3 || rep.Skipped != 0 || rep.Left != 0 || rep.Reason != replay.Drained {
			t.Fatalf("report %+v, err %v", rep, err)
		}
		if rep.String() != "moved 3, skipped 0 (drained)" {
			t.Fatalf("String %q", rep.String())
		}
		got := drain(t, c, q)
		if len(got) != 3 {
			t.Fatalf("%d messages in %s", len(got), q)
		}
		for i, m := range got {
			e := m.Envelope
			if e.ID != ids[i] || e.Attempt != 1 || e.Error != "" || string(m.Body) != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("message %d: %+v %s", i, e, m.Body)
			}
			if _, ok := m.Headers[header.Error]; ok {
				t.Fatal("x-acemq-error still written")
			}
			if e.FirstSeen.IsZero() || time.Since(e.FirstSeen) < time.Hour {
				t.Fatalf("first-seen %v not kept", e.FirstSeen)
			}
			if v, _ := e.Header("x-test-keep"); v != "yes" {
				t.Fatalf("application header lost: %v", v)
			}
			if m.Headers[header.ReplayedFrom] != acemq.DeadLetterQueue(q) || acemq.ReplayCount(e) != 1 {
				t.Fatalf("stamps %v", m.Headers)
			}
			at, ok := acemq.ReplayedAt(e)
			if !ok || at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Fatalf("replayed-at %v (%v) from %v", at, ok, m.Headers[header.ReplayedAt])
			}
		}
		// Set one aside again and replay it a second time: the count goes on.
		raw := got[0].Raw("", acemq.DeadLetterQueue(q))
		if err := c.PublishRaw(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
		if rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), manage(c)); err != nil || rep.Moved != 1 {
			t.Fatalf("second replay %+v %v", rep, err)
		}
		again := drain(t, c, q)
		if len(again) != 1 || acemq.ReplayCount(again[0].Envelope) != 2 {
			t.Fatalf("second replay gave %d messages, count %v", len(again), again[0].Headers[header.ReplayCount])
		}
	})
}

func TestReplayKeepAttemptsLeavesAttemptAndError(t *testing.T) {
	c := connect(t, "memory://"+memName(t))
	q, _ := setup(t, c, 1)
	if _, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.KeepAttempts(), manage(c)); err != nil {
		t.Fatal(err)
	}
	got := drain(t, c, q)
	if len(got) != 1 || got[0].Envelope.Attempt != 3 || got[0].Envelope.Error != "exhausted 3 attempts: boom" || acemq.ReplayCount(got[0].Envelope) != 1 {
		t.Fatalf("%+v", got)
	}
}

func TestReplayFromParkedGoesToTheSourceQueue(t *testing.T) {
	c := connect(t, "memory://"+memName(t))
	q, _ := setup(t, c, 0)
	if _, err := c.Publish(context.Background(), "", acemq.ParkedQueue(q), job{N: 7}, acemq.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Queue(context.Background(), c, acemq.ParkedQueue(q), manage(c))
	if err != nil || rep.Moved != 1 || count(t, c, q) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestReplayStopsAtTheLimit(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, _ := setup(t, c, 5)
		rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.Limit(2), manage(c))
		if err != nil || rep.Moved != 2 || rep.Left != 3 || rep.Reason != replay.LimitReached || rep.String() != "moved 2, skipped 0 (limit)" {
			t.Fatalf("%+v %v", rep, err)
		}
		if count(t, c, q) != 2 || count(t, c, acemq.DeadLetterQueue(q)) != 3 {
			t.Fatal("wrong counts after a limited replay")
		}
	})
}

func TestReplayFilterSkipsWithoutStopping(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 6)
		odd := map[string]bool{ids[1]: true, ids[3]: true, ids[5]: true}
		rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.Filter(func(e acemq.Envelope, body []byte) bool {
			return !odd[e.ID]
		}), manage(c))
		if err != nil || rep.Moved != 3 || rep.Skipped != 3 || rep.Reason != replay.Drained {
			t.Fatalf("%+v %v", rep, err)
		}
		for _, m := range drain(t, c, acemq.DeadLetterQueue(q)) {
			if !odd[m.Envelope.ID] || m.Envelope.Attempt != 3 || m.Envelope.Error == "" {
				t.Fatalf("left in the DLQ: %+v", m.Envelope)
			}
			delete(odd, m.Envelope.ID)
		}
		if len(odd) != 0 || count(t, c, q) != 3 {
			t.Fatalf("skipped messages missing from the DLQ: %v", odd)
		}
	})
}

func TestReplayOntoItselfIsRefused(t *testing.T) {
	c := connect(t, "memory://"+memName(t))
	q, _ := setup(t, c, 1)
	for _, opts := range [][]replay.Option{
		{replay.ToQueue(acemq.DeadLetterQueue(q))},
		{replay.ToExchange("", acemq.DeadLetterQueue(q))},
	} {
		_, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), opts...)
		var ce *acemq.ConfigurationError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "onto itself") {
			t.Fatalf("err %v", err)
		}
	}
	if _, err := replay.Queue(context.Background(), c, q, manage(c)); err == nil {
		t.Fatal("a source with no .dlq/.parked suffix and no target was accepted")
	}
	if count(t, c, acemq.DeadLetterQueue(q)) != 1 {
		t.Fatal("a refused replay moved something")
	}
}

func TestReplayToAnUnroutableTargetFailsAndKeepsTheMessage(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, _ := setup(t, c, 2)
		rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.ToQueue(testenv.Unique("replay.nowhere")), manage(c))
		if rep.Reason != replay.Failed || rep.Moved != 0 || !acemq.IsUnroutable(err) || !errors.Is(rep.Err, err) {
			t.Fatalf("%+v %v", rep, err)
		}
		if rep.String() != "moved 0, skipped 0 (failed)" || count(t, c, acemq.DeadLetterQueue(q)) != 2 {
			t.Fatalf("%s; %d left in the DLQ", rep, count(t, c, acemq.DeadLetterQueue(q)))
		}
	})
}

func TestReplayStopsAtTheDeadline(t *testing.T) {
	c := connect(t, "memory://"+memName(t))
	q, _ := setup(t, c, 2)
	rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.Deadline(time.Now()), manage(c))
	if err != nil || rep.Reason != replay.DeadlinePassed || rep.Moved != 0 || rep.Left != 2 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// everyIDOnce asserts every id is in q or q.dlq (or both), never neither.
func everyIDSomewhere(t *testing.T, c *acemq.Conn, q string, ids []string) (inTarget, inDLQ int) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range drain(t, c, q) {
		seen[m.Envelope.ID]++
		inTarget++
	}
	for _, m := range drain(t, c, acemq.DeadLetterQueue(q)) {
		seen[m.Envelope.ID]++
		inDLQ++
	}
	for _, id := range ids {
		if seen[id] == 0 {
			t.Fatalf("message %s is in neither %s nor its DLQ", id, q)
		}
	}
	return inTarget, inDLQ
}

func TestCancelledReplayLosesNothing(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, ids := setup(t, c, 10)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := 0
		rep, err := replay.Queue(ctx, c, acemq.DeadLetterQueue(q), replay.Filter(func(acemq.Envelope, []byte) bool {
			seen++
			if seen == 5 {
				cancel()
			}
			return true
		}), manage(c))
		if rep.Reason != replay.Cancelled || !errors.Is(err, context.Canceled) || rep.Moved != 4 {
			t.Fatalf("%+v %v", rep, err)
		}
		inTarget, inDLQ := everyIDSomewhere(t, c, q, ids)
		if inTarget != 4 || inDLQ != 6 {
			t.Fatalf("%d in the target, %d in the DLQ", inTarget, inDLQ)
		}
	})
}

func TestReplayInterruptedByAConnectionDropLosesNothing(t *testing.T) {
	name := memName(t)
	c := connect(t, "memory://"+name, acemq.Config{RecoveryInterval: 5 * time.Millisecond, RecoveryIntervalMax: 50 * time.Millisecond})
	q, ids := setup(t, c, 10)
	var once sync.Once
	seen := 0
	rep, err := replay.Queue(context.Background(), c, acemq.DeadLetterQueue(q), replay.Filter(func(acemq.Envelope, []byte) bool {
		seen++
		if seen == 5 {
			once.Do(memory.Lookup(name).DropConnections)
		}
		return true
	}), manage(c))
	if rep.Reason != replay.Failed || err == nil || rep.Moved != 4 {
		t.Fatalf("%+v %v", rep, err)
	}
	// Count on a fresh connection: the first one may still be recovering.
	fresh := connect(t, "memory://"+name)
	inTarget, inDLQ := everyIDSomewhere(t, fresh, q, ids)
	if inTarget+inDLQ < len(ids) {
		t.Fatalf("%d in the target, %d in the DLQ", inTarget, inDLQ)
	}
}

// A dead letter whose content header is just under frame_max cannot be
// replayed once the replay headers are stamped on it: the replay is
// refused before writing (acemq.ErrHeaderLimit), the message goes back to
// the DLQ, and the connection, which the broker would have closed, stays
// up for the next replay.
func TestReplayOfAMessageThatWouldBeOverFrameMaxIsRefusedAndKeepsIt(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q, _ := setup(t, c, 0)
		dlq := acemq.DeadLetterQueue(q)
		raw := func(n int) error {
			return c.PublishRaw(context.Background(), acemq.RawMessage{RoutingKey: dlq, ContentType: "application/json", MessageID: "big-1",
				Headers: map[string]any{header.ID: "big-1", header.Error: "boom", "x-big": strings.Repeat("b", n)}, Body: []byte(`{"n":1}`)})
		}
		var le *transport.LimitError
		if err := raw(transport.DefaultFrameMax); !errors.As(err, &le) {
			t.Fatalf("PublishRaw of a frame_max-sized header = %v, want a LimitError", err)
		}
		if err := raw(transport.DefaultFrameMax - (le.Size - transport.DefaultFrameMax)); err != nil {
			t.Fatal(err)
		}
		rep, err := replay.Queue(context.Background(), c, dlq, manage(c))
		if !errors.Is(err, acemq.ErrHeaderLimit) || rep.Reason != replay.Failed || rep.Moved != 0 {
			t.Fatalf("%+v %v, want the replay refused with ErrHeaderLimit", rep, err)
		}
		if n := count(t, c, dlq); n != 1 {
			t.Fatalf("%d messages left in the DLQ, want the one refused", n)
		}
		if _, err := c.QueueInfo(context.Background(), q); err != nil {
			t.Fatalf("the Conn is not usable after the refusal: %v", err)
		}
	})
}
