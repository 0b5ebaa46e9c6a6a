package schedule

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
)

// fullRestart runs the batch (delays 0.5 s to 70 s, the broker
// restarted 10 s in): make schedule-restart. make test runs a short batch
// (0.5 s to 15 s, the restart begun at once).
var fullRestart = flag.Bool("schedule.full", false, "TestTheSchedulerDeliversAMixedBatchThroughABrokerRestart with the issue's delays (0.5 s to 70 s)")

// The scheduler through a broker restart (rabbitmqctl stop_app/start_app)
// while messages wait on the ladder, in the due queue and in the
// scheduler's hands: every message arrives at least once (hops are
// at-least-once and each delivery has a fresh id, so payloads are tagged
// to count duplicates) and none more than the contract's second early.
func TestTheSchedulerDeliversAMixedBatchThroughABrokerRestart(t *testing.T) {
	u := testenv.AMQPURL(t)
	testenv.RequireRabbitCtl(t)
	delays := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second,
		3 * time.Second, 5 * time.Second, 8 * time.Second, 11 * time.Second, 15 * time.Second}
	restartAfter := time.Duration(0) // stop_app itself takes seconds (it boots an Erlang VM)
	// How long rabbitmqctl takes here decides when the node goes down: on
	// a loaded machine stop_app took 26 s and the whole short batch had
	// arrived before it, proving nothing. The short batch's last messages
	// wait at least three such calls longer.
	probe := time.Now()
	testenv.RabbitCtl(t, "eval", "ok.")
	if slow := 3 * time.Since(probe); !*fullRestart && slow > 5*time.Second {
		delays = append(delays, 15*time.Second+slow)
	}
	if *fullRestart {
		delays = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 9 * time.Second,
			10 * time.Second, 15 * time.Second, 30 * time.Second, 45 * time.Second, 59 * time.Second, time.Minute, 70 * time.Second}
		restartAfter = 10 * time.Second
	}
	type event struct {
		kind acemq.EventKind
		at   time.Time
	}
	events := make(chan event, 256)
	c := brokertest.Connect(t, u, acemq.Config{OnEvent: func(e acemq.Event) {
		select {
		case events <- event{e.Kind, time.Now()}:
		default:
		}
	}})
	startScheduler(t, c)
	q := brokertest.Queue(t, c, "schedule.restart")
	got := target(t, c, q)

	due := map[string]time.Time{}
	for i, d := range delays {
		tag := fmt.Sprintf("m%d-%v", i, d)
		at := time.Now().Add(d)
		due[tag] = at
		if err := At(context.Background(), c, "", q, tag, at, WithCodec(acemq.Text())); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := time.Now()

	seen := map[string]int{}
	var arrivals []time.Time
	arrive := func(a arrival) {
		arrivals = append(arrivals, a.at)
		want, ok := due[a.tag]
		if !ok {
			t.Errorf("an unexpected message %q", a.tag)
			return
		}
		seen[a.tag]++
		if early := want.Sub(a.at); early > time.Second+50*time.Millisecond {
			t.Errorf("%s arrived %v early; the ladder never hops past the due time", a.tag, early)
		}
	}
	collect := func(until time.Time) {
		for {
			select {
			case a := <-got:
				arrive(a)
			case <-time.After(time.Until(until)):
				return
			}
		}
	}

	// Restart the node while the batch is on its way.
	collect(scheduled.Add(restartAfter))
	at := map[acemq.EventKind]time.Time{}
	stopped := true
	t.Cleanup(func() {
		if stopped && !accepting(u) {
			testenv.RabbitCtl(t, "start_app") // leave the node running whatever happened
		}
	})
	waitEvent := func(kind acemq.EventKind, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case e := <-events:
				if e.kind == kind {
					at[kind] = e.at
					return
				}
			case a := <-got:
				arrive(a)
			case <-deadline:
				t.Fatalf("no %s event within %v of the restart", kind, within)
			}
		}
	}
	// rabbitmqctl blocks for seconds; the handler stamps arrivals, so
	// they are read afterwards.
	testenv.RabbitCtl(t, "stop_app")
	waitEvent(acemq.EventLost, 30*time.Second)
	testenv.RabbitCtl(t, "start_app")
	stopped = false
	waitEvent(acemq.EventRecovered, time.Minute)
	collect(time.Now().Add(100 * time.Millisecond)) // what is buffered
	pending := len(delays)
	for _, a := range arrivals {
		if a.Before(at[acemq.EventLost]) {
			pending--
		}
	}
	t.Logf("restart: the connection was lost %v after scheduling with %d of %d messages still to arrive, recovered %v after scheduling",
		at[acemq.EventLost].Sub(scheduled).Round(time.Millisecond), pending, len(delays), at[acemq.EventRecovered].Sub(scheduled).Round(time.Millisecond))
	if pending == 0 {
		t.Fatalf("the whole batch arrived before the broker went down (%v after scheduling): the restart came too late to prove anything; lengthen the delays", at[acemq.EventLost].Sub(scheduled))
	}

	last := scheduled.Add(delays[len(delays)-1])
	deadline := time.Now().Add(time.Until(last) + 30*time.Second)
	for len(seen) < len(delays) {
		select {
		case a := <-got:
			arrive(a)
		case <-time.After(time.Until(deadline)):
			var missing []string
			for tag := range due {
				if seen[tag] == 0 {
					missing = append(missing, tag)
				}
			}
			sort.Strings(missing)
			t.Fatalf("%d of %d scheduled messages never arrived (30 s past the last due time): %s", len(missing), len(delays), strings.Join(missing, ", "))
		}
	}
	var dups []string
	for tag, n := range seen {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s×%d", tag, n))
		}
	}
	t.Logf("all %d arrived; duplicates (allowed: at-least-once): %v", len(delays), dups)
}

// accepting reports whether the node takes TCP connections on url's port.
func accepting(amqpURL string) bool {
	u, err := url.Parse(amqpURL)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
