package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport/memory"
)

// streamFixture declares a stream with retention on url and publishes n
// messages {"N": i}; it is deleted at cleanup.
func streamFixture(t *testing.T, url string, n int) string {
	t.Helper()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Unique("cli-stream")
	top := acemq.NewTopology().Queue(s, acemq.QueueOptions{Type: acemq.Stream, MaxAge: 36 * time.Hour, MaxBytes: 1 << 30, SegmentBytes: 1 << 20})
	if err := c.Apply(ctx, top); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Publish(ctx, "", s, map[string]int{"N": i}, acemq.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = c.DeleteQueue(context.Background(), s)
		_ = c.Close(context.Background())
	})
	return s
}

// inProcess runs the command in this process (a memory:// broker lives in
// one process) and returns its output and error.
func inProcess(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// tailed parses stream tail's lines and checks their bodies are N = from…
func tailed(t *testing.T, out string, from, count int) []streamLine {
	t.Helper()
	var lines []streamLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var sl streamLine
		if err := json.Unmarshal([]byte(l), &sl); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		lines = append(lines, sl)
	}
	if len(lines) != count {
		t.Fatalf("stream tail printed %d lines, want %d:\n%s", len(lines), count, out)
	}
	for i, l := range lines {
		if l.Body != fmt.Sprintf(`{"N":%d}`, from+i) || l.ID == "" || (i > 0 && l.Offset <= lines[i-1].Offset) {
			t.Fatalf("line %d = %+v; want body N=%d, an id, a rising offset", i, l, from+i)
		}
	}
	return lines
}

func TestStreamTailAndInfoOnMemory(t *testing.T) {
	url := "memory://" + t.Name()
	defer memory.Delete(t.Name())
	s := streamFixture(t, url, 5)
	out, err := inProcess(t, "stream", "tail", s, "--url", url, "--from", "first", "-n", "5")
	if err != nil {
		t.Fatal(err)
	}
	if lines := tailed(t, out, 0, 5); lines[0].Offset != 0 || lines[4].Offset != 4 {
		t.Fatalf("offsets %d…%d, want 0…4", lines[0].Offset, lines[4].Offset)
	}
	out, err = inProcess(t, "stream", "tail", s, "--url", url, "--from", "3", "-n", "2")
	if err != nil {
		t.Fatal(err)
	}
	if lines := tailed(t, out, 3, 2); lines[0].Offset != 3 {
		t.Fatalf("--from 3 started at offset %d", lines[0].Offset)
	}
	out, err = inProcess(t, "stream", "info", s, "--url", url, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info streamInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 4 || info.Messages != 5 || !strings.Contains(info.Retention, "memory://") {
		t.Fatalf("stream info = %+v; want offsets 0…4, 5 messages, retention said unreadable on memory://", info)
	}
}

func TestStreamTailAndInfoOnRabbitMQ(t *testing.T) {
	url, mgmt := testenv.AMQPURL(t), testManagementURL(t)
	s := streamFixture(t, url, 4)

	lines := tailed(t, run0(t, "", "stream", "tail", s, "--url", url, "--from", "first", "-n", "4").stdout, 0, 4)
	if lines[0].Offset != 0 {
		t.Fatalf("--from first started at offset %d", lines[0].Offset)
	}
	tailed(t, run0(t, "", "stream", "tail", s, "--url", url, "--from", fmt.Sprint(lines[2].Offset), "-n", "2").stdout, 2, 2)
	tailed(t, run0(t, "", "stream", "tail", s, "--url", url, "--from", "1h", "-n", "4").stdout, 0, 4)

	var info streamInfo
	r := run0(t, "", "stream", "info", s, "--url", url, "--management-url", mgmt, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if info.FirstOffset != 0 || info.LastOffset != lines[3].Offset || info.Messages != lines[3].Offset+1 ||
		info.MaxAge != "36h" || info.MaxLengthBytes != 1<<30 || info.MaxSegmentBytes != 1<<20 {
		t.Fatalf("stream info = %+v; want offsets 0…%d, max age 36h, 1 GiB, 1 MiB segments", info, lines[3].Offset)
	}
	// The consumer count is read over AMQP: the management API's is a
	// statistic, missing on a RabbitMQ 4.3 that denies
	// management_metrics_collection (as make test's 4.x node does).
	if info.Consumers == nil {
		t.Fatalf("stream info = %+v; want a consumer count", info)
	}
	text := run0(t, "", "stream", "info", s, "--url", url, "--management-url", mgmt).stdout
	for _, want := range []string{"max age    36h", "messages   4", "offsets    0 … 3"} {
		if !strings.Contains(text, want) {
			t.Fatalf("stream info lacks %q:\n%s", want, text)
		}
	}

	mustFailWithSentence(t, acemqCmd(t, "", "stream", "tail", s+".missing", "--url", url), "does not exist")
	mustFailWithSentence(t, acemqCmd(t, "", "stream", "tail", s, "--url", url, "--from", "yesterday"), "cannot read stream position")
	for _, sub := range []string{"tail", "info"} {
		if r := run0(t, "", "stream", sub, "--help"); !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "--url") {
			t.Errorf("acemq stream %s --help lacks an example or --url", sub)
		}
	}
}
