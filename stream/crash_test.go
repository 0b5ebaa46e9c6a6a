package stream

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/sqlstore"
	"github.com/acemq-go/acemq/stream/internal/brokertest"
	"github.com/acemq-go/acemq/stream/internal/dbtest"
	"github.com/acemq-go/acemq/stream/internal/testenv"
)

// The crash test runs readers as real processes: the test binary started
// again with crashRole set runs one reader (runCrashReader) instead of the
// tests.
const crashRole = "ACEMQ_STREAM_CRASH_ROLE"

// crashTotal messages are in the stream; crashEvery is the reader's
// checkpoint count.
const (
	crashTotal = 200
	crashEvery = 10
)

// printingStore says on stdout which offsets it saved (after the commit).
type printingStore struct {
	CheckpointStore
	mu  sync.Mutex
	out *bufio.Writer
}

func (p *printingStore) Save(ctx context.Context, s, r string, off int64) error {
	if err := p.CheckpointStore.Save(ctx, s, r, off); err != nil {
		return err
	}
	p.line("c %d", off)
	return nil
}

func (p *printingStore) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format+"\n", args...)
	p.out.Flush()
}

// runCrashReader is a reader process: it reads the stream named by the
// environment from its PostgreSQL checkpoint (From(First()) the first
// time), printing "h <offset> <n>" as each message arrives at the handler,
// "c <offset>" after each committed checkpoint and "done" after the last
// message, and runs until killed.
func runCrashReader() int {
	db, err := sql.Open("pgx", os.Getenv("ACEMQ_STREAM_CRASH_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, os.Getenv("ACEMQ_STREAM_CRASH_AMQP"), acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sqlStore, err := NewSQLCheckpoints(db, sqlstore.PostgreSQL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	store := &printingStore{CheckpointStore: sqlStore, out: bufio.NewWriter(os.Stdout)}
	_, err = Read(ctx, c, os.Getenv("ACEMQ_STREAM_CRASH_STREAM"), "crash-reader", func(_ context.Context, m *Message[event]) acemq.Decision {
		store.line("h %d %d", m.Offset, m.Payload.N)
		// The work of a projection: a few ms per message, so the kill
		// lands mid-read.
		time.Sleep(time.Millisecond)
		if m.Payload.N == crashTotal-1 {
			store.line("done")
		}
		return acemq.Accept()
	}, From(First()), Checkpoint(store, crashEvery, 0), LagProbe(0), Prefetch(10))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	select {} // until SIGKILL
}

// crashRun is what one reader process printed.
type crashRun struct {
	offsets, ns []int64
	checkpoint  int64 // newest "c" line; -1 none
	done        bool
}

// startCrashReader starts a reader process and returns a channel of its
// lines and the process.
func startCrashReader(t *testing.T, env []string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, crashRole+"=reader")...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, lines
}

// follow reads a process's lines into run until stop says so (then
// SIGKILLs it and reads the rest) or the deadline passes.
func follow(t *testing.T, cmd *exec.Cmd, lines <-chan string, stop func(*crashRun) bool) *crashRun {
	t.Helper()
	run := &crashRun{checkpoint: -1}
	deadline := time.After(30 * time.Second)
	killed := false
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				if !killed {
					t.Fatal("the reader process exited by itself; see its stderr above")
				}
				return run
			}
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[0] == "h":
				off, _ := strconv.ParseInt(f[1], 10, 64)
				n, _ := strconv.ParseInt(f[2], 10, 64)
				run.offsets, run.ns = append(run.offsets, off), append(run.ns, n)
			case len(f) == 2 && f[0] == "c":
				run.checkpoint, _ = strconv.ParseInt(f[1], 10, 64)
			case len(f) == 1 && f[0] == "done":
				run.done = true
			}
			if !killed && stop(run) {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
				killed = true // read on to the end of its output
			}
		case <-deadline:
			t.Fatalf("the reader process made no progress to the expected point within 30 s: %d handled", len(run.ns))
		}
	}
}

// TestCrashedReaderResumesFromItsSQLCheckpoint SIGKILLs a reader process
// mid-read and starts another with the same PostgreSQL checkpoint store:
// together they handle every message (no gap), and the second re-reads
// exactly the messages the first handled after its last committed
// checkpoint — the window, and no more. RabbitMQ only: a memory:// stream
// lives in one process.
func TestCrashedReaderResumesFromItsSQLCheckpoint(t *testing.T) {
	url := testenv.AMQPURL(t)
	db, _ := dbtest.Postgres(t)
	ctx := context.Background()
	store, err := NewSQLCheckpoints(db, sqlstore.PostgreSQL)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	dsn := testenv.PostgresURL(t)
	if strings.Contains(dsn, "?") {
		dsn += "&search_path=" + schema
	} else {
		dsn += "?search_path=" + schema
	}
	app := strings.ReplaceAll(testenv.Unique("crashreader"), ".", "-")
	dsn += "&application_name=" + app

	c := brokertest.Connect(t, url)
	s := newStream(t, c)
	publish(t, c, s, 0, crashTotal)
	env := []string{"ACEMQ_STREAM_CRASH_DSN=" + dsn, "ACEMQ_STREAM_CRASH_AMQP=" + url, "ACEMQ_STREAM_CRASH_STREAM=" + s}

	cmd, lines := startCrashReader(t, env)
	first := follow(t, cmd, lines, func(r *crashRun) bool { return len(r.ns) >= crashTotal/3 && r.checkpoint >= 0 })
	if first.done || len(first.ns) >= crashTotal {
		t.Fatalf("the first reader finished (%d handled) before the kill; the test needs it killed mid-read", len(first.ns))
	}
	// The killed process may have sent a checkpoint's COMMIT that its
	// server session has not applied yet: read the store once that
	// session is gone (a run failed reading 39 while 49 was on its way).
	for deadline := time.Now().Add(30 * time.Second); ; {
		var sessions int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&sessions); err != nil {
			t.Fatal(err)
		}
		if sessions == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed reader's %d database sessions were still open 30 s after the kill", sessions)
		}
		time.Sleep(20 * time.Millisecond) // the server notices the closed socket
	}
	saved, ok, err := store.Load(ctx, s, "crash-reader")
	if err != nil || !ok {
		t.Fatalf("no checkpoint after the kill: %v, %v", ok, err)
	}
	if saved < first.checkpoint {
		t.Fatalf("the store holds %d, older than the checkpoint %d the reader reported committed", saved, first.checkpoint)
	}

	cmd2, lines2 := startCrashReader(t, env)
	second := follow(t, cmd2, lines2, func(r *crashRun) bool { return r.done })

	// No gap: every message handled by one run or the other, in order
	// within each.
	seen := make([]int, crashTotal)
	for _, run := range []*crashRun{first, second} {
		for i, n := range run.ns {
			seen[n]++
			if i > 0 && (n != run.ns[i-1]+1 || run.offsets[i] <= run.offsets[i-1]) {
				t.Fatalf("a run went from n=%d (offset %d) to n=%d (offset %d)", run.ns[i-1], run.offsets[i-1], n, run.offsets[i])
			}
		}
	}
	for n, k := range seen {
		if k == 0 {
			t.Fatalf("message %d was never handled: the restart skipped it", n)
		}
	}
	// The re-read window: the second run starts right after the saved
	// offset, so it re-reads exactly what the first handled past it.
	if second.offsets[0] != saved+1 {
		t.Fatalf("the second run started at offset %d, want %d (after the checkpoint)", second.offsets[0], saved+1)
	}
	lastFirst := first.offsets[len(first.offsets)-1]
	window, reread := 0, 0
	for _, off := range first.offsets {
		if off > saved {
			window++
		}
	}
	for _, off := range second.offsets {
		if off <= lastFirst {
			reread++
		}
	}
	if reread != window {
		t.Fatalf("the second run re-read %d messages; the first handled %d after its checkpoint at %d", reread, window, saved)
	}
	if int64(reread) > lastFirst-first.checkpoint {
		t.Fatalf("the second run re-read %d messages, more than the %d the first handled after the checkpoint it reported", reread, lastFirst-first.checkpoint)
	}
	t.Logf("first run: %d handled, checkpoint %d (reported %d), killed at offset %d; second run re-read %d (window %d), handled %d",
		len(first.ns), saved, first.checkpoint, lastFirst, reread, window, len(second.ns))
}
