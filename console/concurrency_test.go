package console_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/testenv"
	"github.com/acemq-go/acemq/header"
)

// brokers: the in-process broker, and the real one.
var brokers = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"memory", memURL},
	{"rabbitmq", func(t *testing.T) string {
		u := testenv.AMQPURL(t)
		if os.Getenv("ACEMQ_TEST_MANAGEMENT_URL") == "" {
			t.Fatal("ACEMQ_TEST_MANAGEMENT_URL is not set; scripts/rabbitmq.sh writes it with the node's env")
		}
		return u
	}},
}

func forEachBroker(t *testing.T, body func(t *testing.T, url string)) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) { body(t, b.url(t)) })
	}
}

var movedRE = regexp.MustCompile(`moved (\d+), skipped (\d+)`)

func moved(t *testing.T, body string) int {
	t.Helper()
	m := movedRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no report on the page: %s", body)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A replay started while a page is reading the queue waits for the page
// to give its messages back, then moves every one of them. Without the
// console's per-queue serialisation the replay would count and take only
// the messages the page was not holding.
func TestReplayStartedWhileAPageIsReadMovesEveryMessage(t *testing.T) {
	forEachBroker(t, func(t *testing.T, u string) {
		f := newFixture(t, u, nil)
		q := seedQueue(t, f.conn)
		dlq := acemq.DeadLetterQueue(q)
		ids := deadLetter(t, f.conn, dlq, make([]letter, 40)...)
		reading, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var holds atomic.Int32
		var once sync.Once
		f.con.SetBrowseHook(func(queue string, read int) {
			if queue == dlq && read == 20 {
				once.Do(func() { close(reading); <-release })
			}
		})
		f.con.SetHoldHook(func(queue string) {
			if queue == dlq && holds.Add(1) == 2 {
				close(waiting) // the replay is about to wait for the page
			}
		})
		var wg sync.WaitGroup
		var page, rep string
		wg.Go(func() { _, page = f.get("/q/" + dlq) })
		<-reading
		wg.Go(func() { _, rep = f.post("/q/"+dlq+"/replay", url.Values{"confirm": {"yes"}}) })
		select {
		case <-waiting:
		case <-time.After(30 * time.Second):
			t.Fatal("the replay never waited for the page reading the queue")
		}
		close(release)
		wg.Wait()
		if n := moved(t, rep); n != 40 {
			t.Fatalf("the replay moved %d, want 40: %s", n, rep)
		}
		if !regexp.MustCompile(`id="matching">40<`).MatchString(page) {
			t.Fatal("the page did not read all 40 messages")
		}
		if got := drainIDs(t, f.conn, q); !slices.Equal(got, ids) {
			t.Fatalf("%s received %d messages, want the 40 in order", q, len(got))
		}
		if n := depth(t, f.conn, dlq); n != 0 {
			t.Fatalf("%d left in %s", n, dlq)
		}
	})
}

type work struct {
	N int `json:"n"`
}

// Replays from the console while a consumer keeps dead-lettering new
// messages into the same .dlq: every message ends up exactly once either
// handled after a replay or still in the .dlq.
func TestReplayWhileAConsumerDeadLettersCountsEveryMessageOnce(t *testing.T) {
	forEachBroker(t, func(t *testing.T, u string) {
		const total = 300
		f := newFixture(t, u, nil)
		q := seedQueue(t, f.conn)
		dlq := acemq.DeadLetterQueue(q)
		worker := connect(t, u)
		var mu sync.Mutex
		handled := map[string]int{} // handled after a replay
		var rejected atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		k, err := acemq.Consume(ctx, worker, q, func(_ context.Context, m *acemq.Message[work]) acemq.Decision {
			if _, ok := m.Envelope.Header(header.ReplayedFrom); ok {
				mu.Lock()
				handled[m.Envelope.ID]++
				mu.Unlock()
				return acemq.Accept()
			}
			rejected.Add(1)
			return acemq.Reject(errors.New("not yet"))
		}, acemq.ConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = k.Close(context.Background()) }()
		var published []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range total {
				s, err := worker.Publish(ctx, "", q, work{N: i}, acemq.SendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				published = append(published, s.Envelope.ID)
			}
		}()
		movedTotal, replays := 0, 0
		for running := true; running || replays < 3; replays++ {
			select {
			case <-done:
				running = false
			default:
			}
			_, body := f.post("/q/"+dlq+"/replay", url.Values{"confirm": {"yes"}})
			movedTotal += moved(t, body)
		}
		<-done
		if t.Failed() {
			return
		}
		// Wait for the consumer to settle everything: every publish
		// rejected once, every replayed message handled, the rest landed.
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			h := len(handled)
			mu.Unlock()
			if int(rejected.Load()) == total && h == movedTotal && depth(t, f.conn, dlq) == total-movedTotal {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not settled: rejected %d/%d, handled %d of %d moved, dlq %d", rejected.Load(), total, h, movedTotal, depth(t, f.conn, dlq))
			}
			time.Sleep(20 * time.Millisecond)
		}
		left := drainIDs(t, f.conn, dlq)
		count := map[string]int{}
		for _, id := range left {
			count[id]++
		}
		mu.Lock()
		for id, n := range handled {
			count[id] += n
		}
		mu.Unlock()
		for _, id := range published {
			if count[id] != 1 {
				t.Errorf("message %s counted %d times", id, count[id])
			}
			delete(count, id)
		}
		if len(count) != 0 {
			t.Errorf("%d unknown messages", len(count))
		}
		t.Logf("%d replays moved %d; %d still in %s", replays, movedTotal, len(left), dlq)
		if movedTotal == 0 {
			t.Error("no replay moved anything while the consumer was dead-lettering")
		}
	})
}
