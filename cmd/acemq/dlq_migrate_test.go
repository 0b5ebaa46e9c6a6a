package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/migrate"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// TestDLQMigrateSurvivesSIGKILLAtEveryStep moves a classic .dlq of 300
// dead letters to the replicated layout with the built command, killing it
// (SIGKILL) at points in both steps while dead letters keep arriving, and
// then lets a last run finish: every dead letter is in the quorum .dlq
// exactly once, and nothing of the move is left.
func TestDLQMigrateSurvivesSIGKILLAtEveryStep(t *testing.T) {
	url := testenv.AMQPURL(t)
	ctx := context.Background()
	q := testenv.Unique("cli.migrate")
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	t.Cleanup(func() {
		for _, n := range []string{q, q + ".dlq", q + ".parked", q + ".dlq" + migrate.Suffix, q + ".parked" + migrate.Suffix} {
			_, _ = c.DeleteQueue(context.Background(), n)
		}
	})
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		t.Fatal(err)
	}
	written := map[string]int{}
	write := func(id string) {
		t.Helper()
		for {
			err := c.PublishRaw(ctx, acemq.RawMessage{RoutingKey: q + ".dlq", MessageID: id, ContentType: "text/plain",
				Headers: map[string]any{"x-acemq-id": id, "x-acemq-error": "the handler rejected it: no"}, Body: []byte(id)})
			if err == nil {
				written[id]++
				return
			}
			// Unroutable while the queue is between its two forms: the
			// engine's fallback keeps such a message and sets it aside again.
			if !acemq.IsUnroutable(err) {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // the writer's back-off before a resend
		}
	}
	for i := range 300 {
		write(fmt.Sprintf("dl-%d", i))
	}

	late := 0
	for _, kill := range []string{"copied 50 ", "copied 240 ", "deleted the old", "moved 30 ", "moved 250 "} {
		// One message per batch: each a confirm round trip, so the kill
		// lands within a few messages of its line.
		cmd := exec.Command(acemqBinary, "dlq", "migrate", q, "--url", url, "--batch", "1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		killed, deleting := false, false
		track := func(l string) {
			switch {
			case strings.Contains(l, "deleting the old"):
				deleting = true
			case strings.Contains(l, "deleted the old"), strings.Contains(l, "received a message during the move"):
				deleting = false
			}
		}
		// Every line read is looked at for the kill, those read while the
		// run is frozen too (a run writes several lines between two reads).
		see := func(l string) {
			track(l)
			if !killed && strings.Contains(l, kill) {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		for l := range lines {
			see(l)
			// Now and then a dead letter arrives while the move runs. The
			// run is frozen (SIGSTOP) for it, and the lines it had written
			// are read first: a run frozen before it says "deleting the old"
			// has not asked for the delete, so the dead letter lands before
			// it. (RabbitMQ confirms and drops a message that was on its way
			// to a queue being deleted: docs/topology.md.)
			if killed || late >= 60 || !strings.Contains(l, "copied") {
				continue
			}
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				continue
			}
			for drained := false; !drained; {
				select {
				case more, ok := <-lines:
					if !ok {
						drained = true
						break
					}
					see(more)
				case <-time.After(50 * time.Millisecond): // the frozen run writes nothing more
					drained = true
				}
			}
			if !deleting && !killed {
				write(fmt.Sprintf("late-%d", late))
				late++
			}
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		err = cmd.Wait()
		if !killed {
			t.Fatalf("the run never reported %q (it ended: %v)", kill, err)
		}
		t.Logf("killed at %q", kill)
	}
	r := acemqCmd(t, "", "dlq", "migrate", q, "--url", url, "--batch", "10")
	if r.code != 0 {
		t.Fatalf("the last run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("the last run:\n%s", r.stdout)

	// What the queue holds, read with the test's own channel.
	ch, err := c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	decls, err := func() ([]acemq.Declaration, error) {
		rc, err := acemq.Connect(ctx, url, acemq.Config{Layout: acemq.ReplicatedLayout, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, err
		}
		defer rc.Close(ctx)
		return rc.LayoutDeclarations(ctx, q)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.DeclareQueue(ctx, decls[0].Queue); err != nil {
		t.Fatalf("%s.dlq is not the replicated layout's quorum queue: %v", q, err)
	}
	for _, n := range []string{q + ".dlq" + migrate.Suffix, q + ".parked" + migrate.Suffix} {
		pc, err := c.Channel(ctx) // a 404 closes the channel it comes on
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.DeclareQueue(ctx, transport.QueueSpec{Name: n, Passive: true}); transport.Code(err) != transport.CodeNotFound {
			t.Errorf("%s is left behind: %v", n, err)
		}
		_ = pc.Close()
	}
	ch, err = c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		d, ok, err := ch.Get(ctx, q+".dlq")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got[d.MessageID]++
		if _, marker := d.Headers[migrate.MarkerHeader]; marker {
			t.Errorf("a marker of the move is in the queue: %v", d.Headers)
		}
	}
	lost, dup := 0, 0
	for id, n := range written {
		switch {
		case got[id] == 0:
			lost++
		case got[id] > n:
			dup++
		}
	}
	t.Logf("%d written (%d during the moves), %d in %s.dlq: %d lost, %d duplicated", len(written), late, len(got), q, lost, dup)
	if lost > 0 || dup > 0 || len(got) != len(written) {
		t.Fatalf("%d lost, %d duplicated, %d ids in the queue for %d written", lost, dup, len(got), len(written))
	}
}

// TestTopologyPlanSaysWhoIsRefusedBeforeTheMove: a topology file with
// layout: replicated against a broker that holds the classic layout plans
// "differs" with a warning naming the 406 the other libraries will get
// and the move; apply keeps the classic queues and says so on stderr;
// after acemq dlq migrate the plan matches.
func TestTopologyPlanSaysWhoIsRefusedBeforeTheMove(t *testing.T) {
	url := testenv.AMQPURL(t)
	name := testenv.Unique("cli.layout")
	c := libConn(t, url)
	deleteQueues(t, c, name+".q", name+".q.dlq", name+".q.parked", name+".q.retry.10s", name+".q.retry.20s")
	classic := writeFile(t, fmt.Sprintf(topologyYAML, name, "quorum"))
	run0(t, "", "topology", "apply", "-f", classic, "--url", url)

	replicated := writeFile(t, "layout: replicated\n"+fmt.Sprintf(topologyYAML, name, "quorum"))
	r := acemqCmd(t, "", "topology", "plan", "-f", replicated, "--url", url)
	if r.code != 3 {
		t.Fatalf("plan: exit %d, want 3\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"queue " + name + ".q.dlq (quorum", ": differs", "406 PRECONDITION_FAILED", "acemq dlq migrate"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the plan does not say %q:\n%s", want, r.stdout)
		}
	}
	r = run0(t, "", "topology", "apply", "-f", replicated, "--url", url)
	if !strings.Contains(r.stderr, name+".q.dlq is on the broker, but not as this Conn's replicated layout declares it") {
		t.Errorf("apply over the classic layout said nothing on stderr:\n%s", r.stderr)
	}
	run0(t, "", "dlq", "migrate", name+".q", "--url", url, "--rung", "10s", "--rung", "20s")
	r = run0(t, "", "topology", "plan", "-f", replicated, "--url", url)
	if !strings.Contains(r.stdout, " 0 differ,") {
		t.Errorf("the plan after the move:\n%s", r.stdout)
	}
}
