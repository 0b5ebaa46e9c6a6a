package stream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
	"github.com/acemq-go/acemq/stream/internal/testenv"
	"github.com/acemq-go/acemq/transport/memory"
)

type event struct{ N int }

// log records what a reader handled, in order.
type log struct {
	mu      sync.Mutex
	offsets []int64
	ns      []int
}

func (l *log) add(m *Message[event]) {
	l.mu.Lock()
	l.offsets = append(l.offsets, m.Offset)
	l.ns = append(l.ns, m.Payload.N)
	l.mu.Unlock()
}

func (l *log) snapshot() ([]int64, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.offsets...), append([]int(nil), l.ns...)
}

func (l *log) count() int { o, _ := l.snapshot(); return len(o) }

func newStream(t *testing.T, c *acemq.Conn) string {
	t.Helper()
	s := testenv.Unique("stream")
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(s, acemq.QueueOptions{Type: acemq.Stream})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{s, acemq.DeadLetterQueue(s), acemq.ParkedQueue(s)} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	return s
}

func publish(t *testing.T, c *acemq.Conn, s string, from, to int) {
	t.Helper()
	for n := from; n < to; n++ {
		if _, err := c.Publish(context.Background(), "", s, event{N: n}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, c *acemq.Conn, s, name string, h Handler[event], opts ...Option) *Reader {
	t.Helper()
	r, err := Read(context.Background(), c, s, name, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func recorder(l *log) Handler[event] {
	return func(_ context.Context, m *Message[event]) acemq.Decision { l.add(m); return acemq.Accept() }
}

// ascending asserts the offsets strictly increase (RabbitMQ's may skip a
// number where a segment starts) and the payloads are want.
func ascending(t *testing.T, who string, l *log, want []int) {
	t.Helper()
	offs, ns := l.snapshot()
	if fmt.Sprint(ns) != fmt.Sprint(want) {
		t.Fatalf("%s read %v, want %v", who, ns, want)
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] <= offs[i-1] {
			t.Fatalf("%s offsets %v do not increase", who, offs)
		}
	}
}

func TestReadersFromFirstATimeAndLast(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 3)
		// Timestamps are whole seconds: wait for the next one to begin.
		at := time.Now().Truncate(time.Second).Add(time.Second)
		time.Sleep(time.Until(at) + 5*time.Millisecond) // waiting for the wall clock itself
		publish(t, c, s, 3, 6)

		var first, since log
		read(t, c, s, "from-first", recorder(&first), From(First()))
		read(t, c, s, "from-time", recorder(&since), From(At(at)))
		brokertest.Eventually(t, "both readers have the six messages", func() bool { return first.count() == 6 && since.count() >= 3 })
		ascending(t, "from first", &first, []int{0, 1, 2, 3, 4, 5})
		offs, _ := first.snapshot()
		if offs[0] != 0 {
			t.Fatalf("from first: first offset %d, want 0", offs[0])
		}
		_, ns := since.snapshot()
		// Every message at or after the time; at most the rest of the
		// chunk before it (one message per publish here).
		if len(ns) > 4 || fmt.Sprint(ns[len(ns)-3:]) != "[3 4 5]" {
			t.Fatalf("from %v read %v, want [3 4 5] with at most one earlier", at, ns)
		}

		var last log
		lr := read(t, c, s, "from-last", recorder(&last), From(Last()))
		brokertest.Eventually(t, "the last reader has the newest message", func() bool { return last.count() == 1 })
		publish(t, c, s, 6, 7)
		brokertest.Eventually(t, "every reader has the new message", func() bool {
			return first.count() == 7 && last.count() == 2
		})
		ascending(t, "from last", &last, []int{5, 6})
		lastOffs, _ := last.snapshot()
		if off, ok := lr.Handled(); !ok || off != lastOffs[1] {
			t.Fatalf("last reader Handled() = %d, %v; want %d", off, ok, lastOffs[1])
		}
	})
}

func TestRetryIsRefusedAndParkedWithTheReason(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 3)
		var l log
		read(t, c, s, "parker", func(_ context.Context, m *Message[event]) acemq.Decision {
			l.add(m)
			if m.Payload.N == 1 {
				return acemq.Retry(fmt.Errorf("db down"))
			}
			return acemq.Accept()
		}, From(First()))
		brokertest.Eventually(t, "the reader moved past the retry", func() bool { return l.count() == 3 })
		p := brokertest.Pull(t, c, acemq.ParkedQueue(s))
		for _, want := range []string{"the handler parked it: ", "asked for retry at offset", "does not allow", "db down"} {
			if !strings.Contains(p.Envelope.Error, want) {
				t.Fatalf("parked reason %q lacks %q", p.Envelope.Error, want)
			}
		}
		if brokertest.Depth(t, c, acemq.ParkedQueue(s)) != 0 {
			t.Fatal("more than the one retried message was parked")
		}
	})
}

func TestStopPolicyHaltsAtTheOffset(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := newStream(t, c)
		publish(t, c, s, 0, 5)
		var l log
		r := read(t, c, s, "stopper", func(_ context.Context, m *Message[event]) acemq.Decision {
			l.add(m)
			if m.Payload.N == 2 {
				panic("bad data")
			}
			return acemq.Accept()
		}, From(First()), OnFailure(Stop))
		brokertest.Eventually(t, "the reader stopped", func() bool { return r.Err() != nil })
		brokertest.Eventually(t, "the reader unsubscribed", func() bool { return brokertest.Consumers(t, c, s) == 0 })
		if _, ns := l.snapshot(); fmt.Sprint(ns) != "[0 1 2]" {
			t.Fatalf("stopped reader handled %v, want [0 1 2] and nothing after", ns)
		}
		offs, _ := l.snapshot()
		if off, _ := r.Handled(); off != offs[1] {
			t.Fatalf("Handled() = %d, want %d (the message before the failure)", off, offs[1])
		}
		err := r.Close(context.Background())
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("stopped at offset %d", offs[2])) || !strings.Contains(err.Error(), "bad data") {
			t.Fatalf("Close() = %v, want the stop at offset %d", err, offs[2])
		}
	})
}

func TestSkipPolicyCountsAndMovesOn(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	publish(t, c, s, 0, 3)
	var l log
	r := read(t, c, s, "skipper", func(_ context.Context, m *Message[event]) acemq.Decision {
		l.add(m)
		if m.Payload.N == 1 {
			return acemq.InProgress(time.Second)
		}
		return acemq.Accept()
	}, From(First()), OnFailure(Skip))
	brokertest.Eventually(t, "the reader read all three", func() bool { return l.count() == 3 })
	if r.Skipped() != 1 || brokertest.Depth(t, c, acemq.ParkedQueue(s)) != 0 {
		t.Fatalf("Skipped() = %d, parked %d; want 1 and 0", r.Skipped(), brokertest.Depth(t, c, acemq.ParkedQueue(s)))
	}
}

// TestRecoveryResumesWithoutAGap drops every connection mid-read (memory's
// DropConnections; rabbitmqctl close_all_connections on RabbitMQ): the
// reader resumes after the newest offset it handled, so every message is
// handled exactly once.
func TestRecoveryResumesWithoutAGap(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		drop := func() { testenv.RabbitCtl(t, "close_all_connections", "test") }
		if strings.HasPrefix(url, "memory://") {
			drop = func() { memory.Lookup(strings.TrimPrefix(url, "memory://")).DropConnections() }
		} else {
			testenv.RabbitCtl(t, "status") // fail early when the node cannot be controlled
		}
		c := brokertest.Connect(t, url, acemq.Config{RecoveryInterval: 10 * time.Millisecond, RecoveryIntervalMax: 200 * time.Millisecond})
		s := newStream(t, c)
		publish(t, c, s, 0, 100)
		var l log
		read(t, c, s, "resumer", func(_ context.Context, m *Message[event]) acemq.Decision {
			l.add(m)
			return acemq.Accept()
		}, From(First()), Prefetch(3))
		brokertest.Eventually(t, "the reader is under way", func() bool { return l.count() >= 5 })
		drop()
		for n := 100; n < 110; n++ {
			// Refused as "not sent" until the Conn has noticed the drop and
			// recovered; nothing is sent twice.
			brokertest.Eventually(t, "a publish after the drop is confirmed", func() bool {
				_, err := c.Publish(context.Background(), "", s, event{N: n}, acemq.SendOptions{})
				return err == nil
			})
		}
		brokertest.Eventually(t, "the reader has read to the end", func() bool { return l.count() >= 110 })
		want := make([]int, 110)
		for i := range want {
			want[i] = i
		}
		ascending(t, "across the drop", &l, want)
	})
}

func TestReadRefusesBadOptions(t *testing.T) {
	c := brokertest.Connect(t, "memory://"+t.Name())
	s := newStream(t, c)
	h := recorder(&log{})
	for _, tc := range []struct {
		name string
		h    Handler[event]
		opts []Option
		want string
	}{
		{"", h, nil, "the name is empty"},
		{"r", nil, nil, "the handler is nil"},
		{"r", h, []Option{Prefetch(0)}, "prefetch 0 is below 1"},
		{"r", h, []Option{OnFailure(FailurePolicy(9))}, "unknown failure policy"},
	} {
		_, err := Read(context.Background(), c, s, tc.name, tc.h, tc.opts...)
		if err == nil || !strings.HasPrefix(err.Error(), "acemq: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestParsePositionReadsEveryForm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"first", "first"}, {"LAST", "last"}, {"next", "next"}, {"", "next"}, {"42", int64(42)},
		{"2026-12-01T10:00:00.700Z", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
	} {
		p, err := ParsePosition(tc.in)
		if err != nil || fmt.Sprint(p.Arg()) != fmt.Sprint(tc.want) {
			t.Errorf("ParsePosition(%q).Arg() = %v, %v; want %v", tc.in, p.Arg(), err, tc.want)
		}
	}
	p, err := ParsePosition("90m")
	if at, ok := p.Arg().(time.Time); err != nil || !ok || time.Since(at) < 89*time.Minute || time.Since(at) > 91*time.Minute {
		t.Errorf("ParsePosition(90m).Arg() = %v, %v; want a time 90 minutes ago", p.Arg(), err)
	}
	for _, bad := range []string{"-1", "yesterday", "0m"} {
		if _, err := ParsePosition(bad); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("ParsePosition(%q) = %v, want an acemq error", bad, err)
		}
	}
}
