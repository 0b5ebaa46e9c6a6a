package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// recordingConn records each socket write; failWith makes writes fail.
type recordingConn struct {
	net.Conn // nil: only Write and Close are used
	mu       sync.Mutex
	writes   [][]byte
	failWith error
	closed   bool
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failWith != nil {
		return 0, r.failWith
	}
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (r *recordingConn) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

func (r *recordingConn) record() ([][]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.writes...), r.closed
}

func TestHeldWritesLeaveInOneWriteWhenTheLastHolderReleases(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	c.Hold(time.Time{})
	c.Hold(time.Time{})
	for _, s := range []string{"a", "bc", "def"} {
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 0 {
		t.Fatalf("a holder is still in its run, yet %d writes reached the socket", len(w))
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	w, _ := rc.record()
	if len(w) != 1 || string(w[0]) != "abcdef" {
		t.Fatalf("socket writes %q; want one write of \"abcdef\"", w)
	}
	if _, err := c.Write([]byte("g")); err != nil { // nobody holds: straight through
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 2 || string(w[1]) != "g" {
		t.Fatalf("socket writes %q; want the unheld write on its own", w)
	}
}

func TestHeldWritesPastTheCapGoThroughInOrder(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	c.Hold(time.Time{})
	var want []byte
	chunk := bytes.Repeat([]byte{'x'}, 10<<10)
	for i := 0; i < 10; i++ {
		chunk[0] = byte('0' + i)
		want = append(want, chunk...)
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if w, _ := rc.record(); len(w) == 0 {
		t.Fatalf("100 KiB written under a hold and none reached the socket; the cap is %d", maxHeld)
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	w, _ := rc.record()
	if got := bytes.Join(w, nil); !bytes.Equal(got, want) {
		t.Fatalf("the socket got %d bytes not in the order written (%d)", len(got), len(want))
	}
	for _, x := range w {
		if len(x) > maxHeld+len(chunk) {
			t.Fatalf("one write of %d bytes; the cap is %d", len(x), maxHeld)
		}
	}
}

func TestHeldBytesOlderThanTheAgeBoundGoOutWithTheNextWrite(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	c.Hold(time.Time{}) // a holder that does not release (descheduled mid-run)
	if _, err := c.Write([]byte("ack-1")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(maxHeldAge / 2)
	if _, err := c.Write([]byte("ack-2")); err != nil {
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 0 {
		t.Fatalf("bytes younger than %s were written under a hold: %q", maxHeldAge, w)
	}
	now = now.Add(maxHeldAge)
	if _, err := c.Write([]byte("ack-3")); err != nil {
		t.Fatal(err)
	}
	w, _ := rc.record()
	if got := string(bytes.Join(w, nil)); got != "ack-1ack-2ack-3" || len(w) != 1 {
		t.Fatalf("kept bytes older than %s did not leave, in order and in one write, with the next: %q", maxHeldAge, w)
	}
	// The next kept byte starts a new age.
	if _, err := c.Write([]byte("ack-4")); err != nil {
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 1 {
		t.Fatalf("a byte kept after the write-through left at once: %q", w)
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 2 || string(w[1]) != "ack-4" {
		t.Fatalf("the last release did not write what was kept: %q", w)
	}
}

func TestAFailedHeldWriteIsReportedClosesTheSocketAndFailsLaterWrites(t *testing.T) {
	boom := errors.New("broken pipe")
	rc := &recordingConn{}
	c := newHeldConn(rc)
	c.Hold(time.Time{})
	if _, err := c.Write([]byte("frames")); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.failWith = boom
	rc.mu.Unlock()
	if err := c.Release(context.Background(), time.Time{}); !errors.Is(err, boom) {
		t.Fatalf("Release = %v; want the write failure", err)
	}
	if _, closed := rc.record(); !closed {
		t.Fatal("the socket was left open after a failed write; the client would not see the loss")
	}
	if _, err := c.Write([]byte("more")); !errors.Is(err, boom) {
		t.Fatalf("a Write after the failure = %v; want the failure", err)
	}
}

func TestHeldBytesPastTheirDeadlineAreDroppedNotSentLate(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	deadline := time.Now().Add(-time.Millisecond) // as if the process froze
	c.Hold(deadline)
	if _, err := c.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background(), deadline); !errors.Is(err, errHeldTooLong) {
		t.Fatalf("Release = %v; want errHeldTooLong", err)
	}
	w, closed := rc.record()
	if len(w) != 0 || !closed {
		t.Fatalf("socket writes %q, closed %v; want nothing written and the socket closed", w, closed)
	}
}

// A publishing connection held across a run of publishes whose socket
// breaks before the last holder releases: Release reports the failure,
// and every publish of the run is answered Lost (its bytes never left),
// none Acked; the publishes before the run stay Acked.
func TestABrokenSocketUnderAHoldFailsEveryPublishOfTheRun(t *testing.T) {
	px, c, q := dialThroughBreakableProxy(t, "hold-break")
	h, ok := c.(transport.Holder)
	if !ok {
		t.Fatal("the RabbitMQ connection is not a transport.Holder")
	}
	p := openPublisher(t, c)
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256)}
	ctx := context.Background()

	before := make(chan transport.Confirmation, 1)
	if err := p.Publish(ctx, msg, func(cf transport.Confirmation) { before <- cf }); err != nil {
		t.Fatal(err)
	}
	if cf := <-before; cf.Outcome != transport.Acked {
		t.Fatalf("the publish before the run: %v", cf.Outcome)
	}

	// A stopped clock: the run's bytes stay kept however long its 50
	// writes take on a loaded machine (the age bound would write them).
	hc := c.(*connection).held.Load()
	hc.mu.Lock()
	stopped := time.Now()
	hc.now = func() time.Time { return stopped }
	hc.mu.Unlock()

	const run = 50
	answers := make(chan transport.Confirmation, run)
	h.Hold(time.Time{})
	for i := 0; i < run; i++ {
		if err := p.Publish(ctx, msg, func(cf transport.Confirmation) { answers <- cf }); err != nil {
			t.Fatalf("publish %d under the hold: %v", i, err)
		}
	}
	px.Kill()
	// The first write to a socket whose peer has gone may still be taken
	// by the kernel; either way the bytes never reach the broker.
	t.Logf("Release after the break: %v", h.Release(context.Background(), time.Time{}))
	timeout := time.After(wait)
	for i := 0; i < run; i++ {
		select {
		case cf := <-answers:
			if cf.Outcome != transport.Lost {
				t.Fatalf("publish %d of the broken run answered %v; want Lost", i, cf.Outcome)
			}
		case <-timeout:
			t.Fatalf("%d of %d publishes of the broken run were never answered", run-i, run)
		}
	}
	if err := p.Publish(ctx, msg, func(transport.Confirmation) {}); err == nil {
		t.Fatal("a publish after the failed write succeeded")
	}
}

// coalesce=off writes straight to the socket; a bad value is refused.
func TestTheCoalesceURLParameter(t *testing.T) {
	for raw, want := range map[string]bool{"amqp://h/": true, "amqp://h/?coalesce=on": true, "amqp://h/?coalesce=off": false} {
		got, err := coalesceSetting(raw)
		if err != nil || got != want {
			t.Errorf("coalesceSetting(%q) = %v, %v; want %v", raw, got, err, want)
		}
	}
	if _, err := coalesceSetting("amqp://h/?coalesce=maybe"); err == nil || !strings.Contains(err.Error(), "coalesce=off") {
		t.Errorf("coalesce=maybe: %v; want an error saying what to write", err)
	}
}

// Several goroutines publish in held runs while a consumer on the same
// connection acks what they publish: the acks are written through the
// same held socket (kept while any run is open, written by the last
// holder out). Every publish is Acked and every message delivered and
// acked (the prefetch of 50 stops deliveries if acks stay behind), so
// the queue is empty once the consuming channel closes. Run with -race.
func TestHeldRunsAndConsumerAcksShareOneConnection(t *testing.T) {
	c := dial(t, transport.Config{})
	h := c.(transport.Holder)
	q := tempQueue(t, c, "hold-share", nil)
	ch := openChannel(t, c)
	if err := ch.Qos(50); err != nil {
		t.Fatal(err)
	}
	in, err := ch.Consume(context.Background(), transport.ConsumeSpec{Queue: q, Tag: testenv.Unique("hold-share")})
	if err != nil {
		t.Fatal(err)
	}
	const writers, runs, perRun = 4, 10, 20
	const total = writers * runs * perRun
	consumed := make(chan error, 1)
	go func() {
		for n := 0; n < total; n++ {
			select {
			case d, ok := <-in:
				if !ok {
					consumed <- errors.New("the delivery channel closed")
					return
				}
				if err := ch.Ack(d.DeliveryTag); err != nil {
					consumed <- err
					return
				}
			case <-time.After(wait):
				consumed <- errors.New("no delivery within the wait")
				return
			}
		}
		consumed <- nil
	}()
	answers := make(chan transport.Outcome, total)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		p := openPublisher(t, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := &transport.Message{RoutingKey: q, Body: make([]byte, 128)}
			for r := 0; r < runs; r++ {
				h.Hold(time.Time{})
				for i := 0; i < perRun; i++ {
					if err := p.Publish(context.Background(), msg, func(cf transport.Confirmation) { answers <- cf.Outcome }); err != nil {
						answers <- 0
					}
				}
				if err := h.Release(context.Background(), time.Time{}); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < total; i++ {
		select {
		case o := <-answers:
			if o != transport.Acked {
				t.Fatalf("publish answered %v; want Acked", o)
			}
		case <-time.After(wait):
			t.Fatalf("%d of %d publishes unanswered", total-i, total)
		}
	}
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
	// Closing the consuming channel requeues anything whose ack did not
	// reach the broker.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := openChannel(t, c).DeclareQueue(context.Background(), transport.QueueSpec{Name: q, Passive: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 0 {
		t.Fatalf("%d messages back on the queue after every delivery was acked", info.Messages)
	}
}

// Issue 28, defect 3: a deadline belongs to its holder. A holds with a
// deadline beside B (none); A releases; C holds and writes after A's
// deadline has passed: nothing of A's is kept any more, so nobody gets
// errHeldTooLong and the socket stays open.
func TestADepartedHoldersDeadlineDoesNotCloseTheConnection(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	deadlineA := now.Add(10 * time.Millisecond)
	c.Hold(deadlineA)   // A
	c.Hold(time.Time{}) // B
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background(), deadlineA); err != nil { // A leaves
		t.Fatalf("A's Release = %v", err)
	}
	now = deadlineA.Add(time.Millisecond)
	c.Hold(time.Time{}) // C
	if _, err := c.Write([]byte("c")); err != nil {
		t.Fatalf("C's Write after A's deadline = %v", err)
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil { // C
		t.Fatalf("C's Release after A's deadline = %v; A had left", err)
	}
	if err := c.Release(context.Background(), time.Time{}); err != nil { // B, the last out
		t.Fatalf("B's Release after A's deadline = %v; A had left", err)
	}
	w, closed := rc.record()
	if closed || string(bytes.Join(w, nil)) != "ac" {
		t.Fatalf("socket writes %q, closed %v; want \"ac\" written and the socket open", w, closed)
	}
}

// A holder that leaves while others still hold takes its deadline with it
// only after its own bytes are out: its kept bytes are written as it
// releases, before its deadline, not later by whoever leaves last.
func TestAHolderWithADeadlineWritesItsKeptBytesAsItLeaves(t *testing.T) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	deadlineA := now.Add(10 * time.Millisecond)
	c.Hold(time.Time{}) // B
	c.Hold(deadlineA)   // A
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background(), deadlineA); err != nil {
		t.Fatal(err)
	}
	if w, _ := rc.record(); len(w) != 1 || string(w[0]) != "a" {
		t.Fatalf("socket writes %q after A left; want A's kept bytes written as it left", w)
	}
	// A holder still inside its run past its deadline: its bytes are
	// dropped, not sent late.
	deadlineD := now.Add(5 * time.Millisecond)
	c.Hold(deadlineD)
	if _, err := c.Write([]byte("d")); err != nil {
		t.Fatal(err)
	}
	now = deadlineD
	if err := c.Release(context.Background(), deadlineD); !errors.Is(err, errHeldTooLong) {
		t.Fatalf("Release past the holder's own deadline = %v; want errHeldTooLong", err)
	}
}
