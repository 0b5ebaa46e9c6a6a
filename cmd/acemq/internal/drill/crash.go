package drill

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
)

// CrashOptions sets up the crash drill.
type CrashOptions struct {
	// Child is the command that starts the child process, before its own
	// flags: e.g. [path-to-acemq, "drill", "child"].
	Child []string
	// Kills is how many times the child is SIGKILLed (default 10).
	Kills int
	// MaxLife bounds the random time a child lives after it has shown
	// progress (default 1s).
	MaxLife time.Duration
	// Workers is the child's publishing goroutines or consumer concurrency
	// (default 4).
	Workers int
	// Messages is what the consumer variant puts on the queue first
	// (default 2000).
	Messages int
	// Dir holds the record files (default a fresh temporary directory,
	// removed afterwards).
	Dir string
}

func (o *CrashOptions) defaults() {
	if o.Kills <= 0 {
		o.Kills = 10
	}
	if o.MaxLife <= 0 {
		o.MaxLife = time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Messages <= 0 {
		o.Messages = 2000
	}
}

// childRun is one life of the child process.
type childRun struct {
	cmd  *exec.Cmd
	done chan error
}

func startChild(o CrashOptions, args ...string) (*childRun, error) {
	if len(o.Child) == 0 {
		return nil, fmt.Errorf("acemq: the crash drill needs the command that starts its child process")
	}
	cmd := exec.Command(o.Child[0], append(append([]string{}, o.Child[1:]...), args...)...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("acemq: cannot start the drill's child process: %w", err)
	}
	r := &childRun{cmd: cmd, done: make(chan error, 1)}
	go func() { r.done <- cmd.Wait() }()
	return r, nil
}

// kill SIGKILLs the child and waits for it to be gone.
func (r *childRun) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// readRecord returns, per kind, how many times each id was recorded.
func readRecord(path string) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, id, ok := strings.Cut(sc.Text(), " ")
		if !ok || id == "" {
			continue // a torn last line is impossible with one write per line, but harmless
		}
		if out[kind] == nil {
			out[kind] = map[string]int{}
		}
		out[kind][id]++
	}
	return out, sc.Err()
}

// countKind counts lines starting with kind in path (cheap enough for the
// drill's few thousand lines).
func countKind(path, kind string) int {
	rec, err := readRecord(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range rec[kind] {
		n += c
	}
	return n
}

// waitProgress waits until more than from lines of kind are recorded, or
// the child exits, or 30 s pass.
func waitProgress(ctx context.Context, r *childRun, path, kind string, from int) error {
	deadline := time.Now().Add(30 * time.Second)
	for countKind(path, kind) <= from {
		select {
		case err := <-r.done:
			r.done <- err
			return fmt.Errorf("the child process exited (%v) before recording any %q line", err, kind)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // the record file has no change event
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the child process recorded no %q line within 30s", kind)
		}
	}
	return nil
}

func (o *CrashOptions) dir() (string, func(), error) {
	if o.Dir != "" {
		return o.Dir, func() {}, os.MkdirAll(o.Dir, 0o755)
	}
	d, err := os.MkdirTemp("", "acemq-drill-crash-")
	return d, func() { os.RemoveAll(d) }, err
}

// crashRig is what the crash variants start from: a scratch directory, a
// Conn and a fresh queue. done removes the queue (and its dead-letter
// half), closes the Conn and the directory.
func crashRig(ctx context.Context, env Env, o CrashOptions, prefix string) (dir string, c *acemq.Conn, q string, done func(), err error) {
	dir, cleanup, err := o.dir()
	if err != nil {
		return "", nil, "", nil, err
	}
	c, err = env.connect(ctx)
	if err != nil {
		cleanup()
		return "", nil, "", nil, err
	}
	q = unique(prefix)
	done = func() {
		for _, name := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = c.DeleteQueue(context.Background(), name)
		}
		_ = c.Close(context.Background())
		cleanup()
	}
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{})); err != nil {
		done()
		return "", nil, "", nil, err
	}
	return dir, c, q, done, nil
}

// CrashPublish runs the crash drill's publisher variant: a child process
// publishing from several goroutines records each id after Send returned
// nil; it is SIGKILLed at a random moment o.Kills times and restarted;
// then the queue is drained and counted. It fails when a confirmed id is
// missing from the queue.
func CrashPublish(ctx context.Context, env Env, o CrashOptions) *Result {
	o.defaults()
	res := newResult("crash-publish")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	dir, c, q, release, err := crashRig(ctx, env, o, "drill.crash.publish")
	if err != nil {
		res.Failf("%v", err)
		return res
	}
	defer release()
	path := filepath.Join(dir, "publish.record")
	for i := 0; i < o.Kills; i++ {
		from := countKind(path, "confirmed")
		r, err := startChild(o, "--mode", "publish", "--url", env.URL, "--queue", q, "--record", path, "--workers", fmt.Sprint(o.Workers))
		if err != nil {
			res.Failf("%v", err)
			return res
		}
		if err := waitProgress(ctx, r, path, "confirmed", from); err != nil {
			r.kill()
			res.Failf("life %d: %v", i+1, err)
			return res
		}
		_ = sleepCtx(ctx, time.Duration(rand.Int64N(int64(o.MaxLife))))
		r.kill()
		env.logf("crash-publish: kill %d of %d, %d confirmed so far", i+1, o.Kills, countKind(path, "confirmed"))
	}
	rec, err := readRecord(path)
	if err != nil {
		res.Failf("cannot read the record: %v", err)
		return res
	}
	got, err := drainIDs(ctx, c, q)
	if err != nil {
		res.Failf("draining %s: %v", q, err)
	}
	confirmed := rec["confirmed"]
	missing, dups, unconfirmed := 0, 0, 0
	for id := range confirmed {
		if got[id] == 0 {
			missing++
		}
	}
	for id, n := range got {
		if n > 1 {
			dups += n - 1
		}
		if confirmed[id] == 0 {
			unconfirmed++
		}
	}
	res.Set("kills", o.Kills)
	res.Set("confirmed", len(confirmed))
	res.Set("on-queue", len(got))
	res.Set("confirmed-missing", missing)
	res.Set("duplicates", dups)
	res.Set("unconfirmed-present", unconfirmed)
	if missing > 0 {
		res.Failf("%d confirmed messages are not on the queue", missing)
	}
	if len(confirmed) == 0 {
		res.Failf("nothing was confirmed")
	}
	return res
}

// CrashConsume runs the crash drill's consumer variant: o.Messages are put
// on a queue; a slow child consumer records "done ID" after its work and
// then holds before returning Accept. It is SIGKILLed o.Kills times and
// restarted: odd kills at a random moment, even kills as soon as a new
// "done" appears, so they land between a handler's work and its ack. Then
// every message must have been handled or still be on the queue, and the
// ack-lost kills must show as messages handled again or put back
// (duplicates ≥ 1).
func CrashConsume(ctx context.Context, env Env, o CrashOptions) *Result {
	o.defaults()
	res := newResult("crash-consume")
	start := time.Now()
	defer func() { res.Took = time.Since(start) }()
	dir, c, q, release, err := crashRig(ctx, env, o, "drill.crash.consume")
	if err != nil {
		res.Failf("%v", err)
		return res
	}
	defer release()
	pub := acemq.NewPublisher[crashMsg](c, "", q, acemq.PublisherConfig{})
	payloads := make([]crashMsg, o.Messages)
	for i := range payloads {
		payloads[i] = crashMsg{Seq: i}
	}
	sents, err := pub.SendAll(ctx, payloads)
	if err != nil {
		res.Failf("filling the queue: %v", err)
		return res
	}
	published := make(map[string]bool, len(sents))
	for _, s := range sents {
		published[s.Envelope.ID] = true
	}
	path := filepath.Join(dir, "consume.record")
	targeted := 0
	for i := 0; i < o.Kills; i++ {
		from := countKind(path, "done")
		r, err := startChild(o, "--mode", "consume", "--url", env.URL, "--queue", q, "--record", path, "--workers", fmt.Sprint(o.Workers))
		if err != nil {
			res.Failf("%v", err)
			return res
		}
		if err := waitProgress(ctx, r, path, "done", from); err != nil {
			r.kill()
			res.Failf("life %d: %v", i+1, err)
			return res
		}
		if i%2 == 1 {
			// Kill at once: the "done" just seen is in its hold, unacked.
			targeted++
		} else {
			_ = sleepCtx(ctx, time.Duration(rand.Int64N(int64(o.MaxLife))))
		}
		r.kill()
		env.logf("crash-consume: kill %d of %d, %d done so far", i+1, o.Kills, countKind(path, "done"))
	}
	rec, err := readRecord(path)
	if err != nil {
		res.Failf("cannot read the record: %v", err)
		return res
	}
	queued, err := drainIDs(ctx, c, q)
	if err != nil {
		res.Failf("draining %s: %v", q, err)
	}
	done := rec["done"]
	missing, unknown, dups := 0, 0, 0
	for id := range published {
		if done[id] == 0 && queued[id] == 0 {
			missing++
		}
	}
	for id := range done {
		if !published[id] {
			unknown++
		}
		if done[id] > 1 || queued[id] > 0 {
			dups++
		}
	}
	res.Set("kills", o.Kills)
	res.Set("kills-before-ack", targeted)
	res.Set("published", len(published))
	res.Set("handled", len(done))
	res.Set("still-queued", len(queued))
	res.Set("missing", missing)
	res.Set("handled-again-or-requeued", dups)
	if missing > 0 {
		res.Failf("%d messages were neither handled nor left on the queue", missing)
	}
	if unknown > 0 {
		res.Failf("%d handled ids were never published", unknown)
	}
	if targeted > 0 && dups == 0 {
		res.Failf("%d kills landed between a handler's work and its ack, yet no message was handled again or put back", targeted)
	}
	return res
}
