package ordered

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
	"github.com/acemq-go/acemq/internal/testenv"
)

// childEnv marks a re-executed test binary as the killed consumer.
const childEnv = "ACEMQ_ORDERED_TEST_CHILD"

// runChild is the consumer process the test kills: it consumes the
// ordered stream named by ACEMQ_ORDERED_NAME (ACEMQ_ORDERED_PARTS
// partitions) and appends "key n" to ACEMQ_ORDERED_LOG for each message it
// handles (one write per line, O_APPEND: a SIGKILL cannot undo a returned
// write). At the ACEMQ_ORDERED_BLOCK-th message it writes the line and
// then hangs in the handler, unacked, until it is killed.
func runChild() int {
	url, name, path := os.Getenv("ACEMQ_TEST_AMQP_URL"), os.Getenv("ACEMQ_ORDERED_NAME"), os.Getenv("ACEMQ_ORDERED_LOG")
	parts, _ := strconv.Atoi(os.Getenv("ACEMQ_ORDERED_PARTS"))
	block, _ := strconv.Atoi(os.Getenv("ACEMQ_ORDERED_BLOCK"))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	handled := 0
	_, err = Consume(ctx, c, name, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
		mu.Lock()
		handled++
		n := handled
		_, werr := fmt.Fprintf(f, "%s %d\n", m.Payload.Key, m.Payload.N)
		mu.Unlock()
		if werr != nil {
			fmt.Fprintln(os.Stderr, werr)
			os.Exit(2)
		}
		if n == block {
			select {} // dies here, mid-partition, with this message unacked
		}
		return acemq.Accept()
	}, Partitions(parts))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	select {} // until killed
}

// TestAKilledConsumerProcessHandsOverAndKeepsEachKeysOrder: two instances
// of a service consume the same partitions with single-active-consumer;
// the active one is a separate process, SIGKILLed while it is handling a
// message in the middle of a partition. The other instance takes over,
// and every key's messages are handled in order across the two: the one
// the dead process was handling runs again, never before its
// predecessors, and nothing is skipped.
func TestAKilledConsumerProcessHandsOverAndKeepsEachKeysOrder(t *testing.T) {
	url := testenv.AMQPURL(t)
	b := brokertest.Connect(t, url)
	const parts, keys, per, block = 2, 4, 25, 30
	name := newStream(t, b, parts, SingleActiveConsumer())
	for i := range per {
		for k := range keys {
			send(t, b, name, parts, fmt.Sprintf("key-%d", k), i)
		}
	}
	path := filepath.Join(t.TempDir(), "child.log")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ACEMQ_ORDERED_NAME="+name, "ACEMQ_ORDERED_LOG="+path,
		"ACEMQ_ORDERED_PARTS="+strconv.Itoa(parts), "ACEMQ_ORDERED_BLOCK="+strconv.Itoa(block))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	childLines := func() []string {
		data, _ := os.ReadFile(path)
		return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(childLines()) < block {
		select {
		case <-exited:
			t.Fatalf("the child exited before it handled %d messages", block)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child handled %d of %d messages in 60 s", len(childLines()), block)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The second instance subscribes while the child is active: it waits.
	var mu sync.Mutex
	var got []item
	kb, err := Consume(context.Background(), b, name, func(ctx context.Context, m *acemq.Message[item]) acemq.Decision {
		mu.Lock()
		got = append(got, m.Payload)
		mu.Unlock()
		return acemq.Accept()
	}, Partitions(parts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kb.Close(context.Background()) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited

	// What the child handled, then what the second instance handled: the
	// broker gave the second nothing while the child lived (single active
	// consumer), so this is the order of handling per partition.
	var handledOrder []item
	for _, line := range childLines() {
		var it item
		if _, err := fmt.Sscanf(line, "%s %d", &it.Key, &it.N); err != nil {
			t.Fatalf("child log line %q: %v", line, err)
		}
		handledOrder = append(handledOrder, it)
	}
	childCount := len(handledOrder)
	distinct := func() int {
		mu.Lock()
		defer mu.Unlock()
		seen := map[item]bool{}
		for _, it := range append(append([]item(nil), handledOrder...), got...) {
			seen[it] = true
		}
		return len(seen)
	}
	brokertest.Eventually(t, "the second instance handles the rest", func() bool { return distinct() == keys*per })
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("the second instance never took over")
	}
	last := map[string]int{}
	for i, it := range append(handledOrder, got...) {
		who := "the killed process"
		if i >= childCount {
			who = "the second instance"
		}
		if prev, ok := last[it.Key]; ok && it.N < prev {
			t.Fatalf("key %s: %s handled %d after %d had been handled", it.Key, who, it.N, prev)
		}
		last[it.Key] = it.N
	}
	t.Logf("the killed process handled %d (one left unacked as it died), the second instance %d", childCount, len(got))
}
