package schedule

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/transport"
)

func TestTheHopGoesToTheLongestRungThatDoesNotOvershoot(t *testing.T) {
	for remaining, want := range map[time.Duration]string{
		-time.Hour:              "",
		999 * time.Millisecond:  "",
		time.Second:             "acemq.schedule.1s",
		9999 * time.Millisecond: "acemq.schedule.1s",
		10 * time.Second:        "acemq.schedule.10s",
		70 * time.Second:        "acemq.schedule.1m",
		59 * time.Minute:        "acemq.schedule.10m",
		3 * time.Hour:           "acemq.schedule.1h",
	} {
		r, hop := rungFor(remaining)
		if r.Queue != want || hop != (want != "") {
			t.Errorf("%v left: rung %q hop %v, want %q", remaining, r.Queue, hop, want)
		}
	}
}

func TestTheTopologyIsTheFamilysAndDeclaresBesideAnothers(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		if err := c.Apply(ctx, Topology()); err != nil {
			t.Fatal(err)
		}
		// Another library's declaration of the same rung (32-bit TTL, as
		// Java writes it) and ours again: both succeed.
		other := acemq.NewTopology().Queue("acemq.schedule.10s", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{
			"x-message-ttl": int32(10000), "x-dead-letter-exchange": Exchange, "x-dead-letter-routing-key": DueQueue,
		}})
		if err := c.Apply(ctx, other); err != nil {
			t.Fatalf("a peer's declaration of a rung: %v", err)
		}
		if err := c.Apply(ctx, Topology()); err != nil {
			t.Fatalf("declaring twice: %v", err)
		}
		var names []string
		for _, d := range Topology().Declarations() {
			names = append(names, d.String())
		}
		got := strings.Join(names, "\n")
		for _, want := range []string{"acemq.schedule.1h", "acemq.schedule.10m", "acemq.schedule.1m", "acemq.schedule.10s", "acemq.schedule.1s", DueQueue} {
			if !strings.Contains(got, want) {
				t.Errorf("the topology lacks %s:\n%s", want, got)
			}
		}
	})
}

// arrival is one scheduled message seen by its target.
type arrival struct {
	tag string
	at  time.Time
	msg *acemq.Message[string]
}

func target(t *testing.T, c *acemq.Conn, q string) <-chan arrival {
	t.Helper()
	ch := make(chan arrival, 64)
	k, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m *acemq.Message[string]) acemq.Decision {
		ch <- arrival{tag: m.Payload, at: time.Now(), msg: m}
		return acemq.Accept()
	}, acemq.ConsumerConfig{Codec: acemq.Composite(acemq.Text(), acemq.JSON())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return ch
}

func startScheduler(t *testing.T, c *acemq.Conn) {
	t.Helper()
	s, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
}

func TestAMixedBatchArrivesOnceEachNeverMoreThanASecondEarly(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		q := brokertest.Queue(t, c, "schedule")
		got := target(t, c, q)
		delays := []time.Duration{0, 300 * time.Millisecond, 1200 * time.Millisecond, 2500 * time.Millisecond, 3500 * time.Millisecond}
		due := map[string]time.Time{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, d := range delays {
			tag := fmt.Sprintf("m%d-%v", i, d)
			at := time.Now().Add(d)
			mu.Lock()
			due[tag] = at
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := At(context.Background(), c, "", q, tag, at, WithCodec(acemq.Text())); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		deadline := time.After(20 * time.Second)
		for len(seen) < len(delays) {
			select {
			case a := <-got:
				seen[a.tag]++
				want, ok := due[a.tag]
				if !ok {
					t.Fatalf("an unexpected message %q", a.tag)
				}
				if early := want.Sub(a.at); early > time.Second+50*time.Millisecond {
					t.Errorf("%s arrived %v early; the ladder never hops past the due time", a.tag, early)
				}
				m := a.msg
				if m.ContentType != "text/plain; charset=utf-8" || m.Envelope.Type != MessageType {
					t.Errorf("%s: content type %q type %q, want the original content type and %s", a.tag, m.ContentType, m.Envelope.Type, MessageType)
				}
				for name := range m.Envelope.Headers() {
					if strings.HasPrefix(name, "x-schedule-") {
						t.Errorf("%s arrived with the scheduler header %s", a.tag, name)
					}
				}
			case <-deadline:
				t.Fatalf("after 20 s only %d of %d scheduled messages arrived: %v", len(seen), len(delays), seen)
			}
		}
		for tag, n := range seen {
			if n != 1 {
				t.Errorf("%s arrived %d times", tag, n)
			}
		}
	})
}

func TestAControlMessageWithoutItsRoutingHeadersIsDeadLettered(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		t.Cleanup(func() { _, _ = c.PurgeQueue(context.Background(), acemq.DeadLetterQueue(DueQueue)) })
		id := "control-" + strings.ReplaceAll(t.Name(), "/", "-")
		if err := c.PublishRaw(context.Background(), acemq.RawMessage{
			RoutingKey: DueQueue, ContentType: "application/octet-stream", Body: []byte("x"), MessageID: id,
			Headers: map[string]any{HeaderDueAt: int64(1), HeaderExchange: ""},
		}); err != nil {
			t.Fatal(err)
		}
		m := brokertest.PullWhere(t, c, acemq.DeadLetterQueue(DueQueue), func(m *acemq.Pulled) bool { return m.Envelope.ID == id })
		if !strings.Contains(m.Envelope.Error, HeaderRoutingKey) || m.Envelope.Attempt != 1 {
			t.Fatalf("dead letter: reason %q attempt %d", m.Envelope.Error, m.Envelope.Attempt)
		}
	})
}

func TestADueMessageWhoseTargetIsGoneIsDeadLettered(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		startScheduler(t, c)
		t.Cleanup(func() { _, _ = c.PurgeQueue(context.Background(), acemq.DeadLetterQueue(DueQueue)) })
		nowhere := "schedule-nowhere-" + strings.ReplaceAll(t.Name(), "/", "-")
		if err := After(context.Background(), c, "", nowhere, "lost?", 1200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		m := brokertest.PullWhere(t, c, acemq.DeadLetterQueue(DueQueue), func(m *acemq.Pulled) bool { return strings.Contains(m.Envelope.Error, nowhere) })
		if !strings.Contains(m.Envelope.Error, "unroutable") {
			t.Fatalf("dead letter reason %q", m.Envelope.Error)
		}
		if v, _ := m.Envelope.Header(HeaderRoutingKey); v != nowhere {
			t.Fatalf("the dead letter lost its routing header (%v): a replay could not deliver it", v)
		}
	})
}

func TestScheduleRefusesWhatItCannotEncode(t *testing.T) {
	c := brokertest.Connect(t, "memory://schedule-encode")
	if err := After(context.Background(), c, "", "q", func() {}, time.Minute); err == nil {
		t.Fatal("a func was scheduled")
	}
}

func TestReadItemAcceptsAnyIntegerForm(t *testing.T) {
	for _, v := range []any{int8(5), int16(5), int32(5), int64(5), uint32(5), "5"} {
		env := acemq.ReadEnvelope(map[string]any{HeaderExchange: "", HeaderRoutingKey: "q", HeaderDueAt: v}, "k", "", "")
		it, err := readItem(env, nil)
		if err != nil || it.dueAt != 5 {
			t.Errorf("%T: %v %d", v, err, it.dueAt)
		}
	}
	env := acemq.ReadEnvelope(map[string]any{HeaderExchange: "", HeaderRoutingKey: "q", HeaderDueAt: 1.5}, "k", "", "")
	if _, err := readItem(env, nil); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("a float due time: %v", err)
	}
}
