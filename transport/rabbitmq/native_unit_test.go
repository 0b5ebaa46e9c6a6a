package rabbitmq

import (
	"bytes"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

func method(ch, class, m uint16, args ...[]byte) []byte {
	return frame(1, ch, append([][]byte{u16(class), u16(m)}, args...)...)
}

// outbound is a stream as amqp091-go writes it: the protocol header, then
// frames of every kind, with channel.close on channel 5 and close-ok on 6.
func outbound() (stream []byte, ends []int, closeAt, closeOkAt int) {
	frames := [][]byte{
		method(1, 60, 10, u32(0), u16(10), []byte{0}), // basic.qos
		frame(2, 1, u16(60), u16(0), u64(3), u16(0)),  // content header
		frame(3, 1, []byte("abc")),                    // body
		frame(8, 0),                                   // heartbeat
		method(5, 20, 40, u16(200), short("bye"), u16(0), u16(0)),
		frame(1, 2, []byte{0, 60}), // a malformed method frame: too short for its class and method
		method(6, 20, 41),
		method(1, 60, 80, u64(9), []byte{0}), // basic.ack of a delivery
	}
	stream = []byte(protocolHeader)
	ends = []int{len(stream)}
	for i, f := range frames {
		switch i {
		case 4:
			closeAt = len(stream) + 11
		case 6:
			closeOkAt = len(stream) + 11
		}
		stream = append(stream, f...)
		ends = append(ends, len(stream))
	}
	return stream, ends, closeAt, closeOkAt
}

func atBoundary(c *heldConn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hn == 0 && c.left == 0
}

func closedW(c *heldConn, nc *nativeChan) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return nc.closedW
}

func trackedConn(ids ...uint16) (*heldConn, *recordingConn, []*nativeChan) {
	rc := &recordingConn{}
	c := newHeldConn(rc)
	c.natives = newNatives()
	var ncs []*nativeChan
	for _, id := range ids {
		nc := newNativeChan(id)
		c.natives.register(nc)
		ncs = append(ncs, nc)
	}
	return c, rc, ncs
}

func TestTrackerFindsEveryFrameEndWhereverTheWritesSplit(t *testing.T) {
	stream, ends, closeAt, closeOkAt := outbound()
	isEnd := map[int]bool{}
	for _, e := range ends {
		isEnd[e] = true
	}
	for k := 1; k < len(stream); k++ {
		c, rc, ncs := trackedConn(5, 6, 7)
		if _, err := c.Write(stream[:k]); err != nil {
			t.Fatal(err)
		}
		if got := atBoundary(c); got != isEnd[k] {
			t.Fatalf("split at %d: at a boundary %v, want %v", k, got, isEnd[k])
		}
		if got := closedW(c, ncs[0]); got != (k >= closeAt) {
			t.Fatalf("split at %d: channel 5 closed for writes %v, want %v (its channel.close is known at %d)", k, got, k >= closeAt, closeAt)
		}
		if got := closedW(c, ncs[1]); got != (k >= closeOkAt) {
			t.Fatalf("split at %d: channel 6 closed for writes %v, want %v", k, got, k >= closeOkAt)
		}
		if _, err := c.Write(stream[k:]); err != nil {
			t.Fatal(err)
		}
		if !atBoundary(c) || !closedW(c, ncs[0]) || !closedW(c, ncs[1]) || closedW(c, ncs[2]) {
			t.Fatalf("split at %d: after the whole stream boundary=%v closed 5,6,7 = %v %v %v, want true, true true false",
				k, atBoundary(c), closedW(c, ncs[0]), closedW(c, ncs[1]), closedW(c, ncs[2]))
		}
		if w, _ := rc.record(); !bytes.Equal(bytes.Join(w, nil), stream) {
			t.Fatalf("split at %d: the socket got other bytes than were written", k)
		}
	}

	// One byte a write.
	c, _, _ := trackedConn()
	for i := range stream {
		if _, err := c.Write(stream[i : i+1]); err != nil {
			t.Fatal(err)
		}
		if got := atBoundary(c); got != isEnd[i+1] {
			t.Fatalf("byte by byte, after %d bytes: at a boundary %v, want %v", i+1, got, isEnd[i+1])
		}
	}
}

// waitFor polls cond until it holds or a second has passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within a second", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waiting(c *heldConn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

type appendResult struct {
	sent bool
	err  error
}

func appendAsync(c *heldConn, nc *nativeChan, frames []byte) chan appendResult {
	res := make(chan appendResult, 1)
	go func() {
		sent, err := c.appendFrames(nc, frames)
		res <- appendResult{sent, err}
	}()
	return res
}

func TestAppendWaitsForTheFrameInProgressThenFollowsIt(t *testing.T) {
	c, rc, ncs := trackedConn(3)
	theirs := method(1, 60, 10, u32(0), u16(10), []byte{0})
	ours := method(3, 85, 10, []byte{0})
	if _, err := c.Write(append([]byte(protocolHeader), theirs[:9]...)); err != nil {
		t.Fatal(err)
	}
	res := appendAsync(c, ncs[0], ours)
	waitFor(t, "the append waiting", func() bool { return waiting(c) == 1 })
	if _, err := c.Write(theirs[9:]); err != nil {
		t.Fatal(err)
	}
	if r := <-res; !r.sent || r.err != nil {
		t.Fatalf("append: sent %v, %v", r.sent, r.err)
	}
	w, _ := rc.record()
	if want := bytes.Join([][]byte{[]byte(protocolHeader), theirs, ours}, nil); !bytes.Equal(bytes.Join(w, nil), want) {
		t.Fatalf("socket got % x\nwant % x", bytes.Join(w, nil), want)
	}
}

func TestAppendIsRefusedOnceAmqp091ClosesTheChannel(t *testing.T) {
	c, rc, ncs := trackedConn(5)
	closeFrame := method(5, 20, 40, u16(200), short("bye"), u16(0), u16(0))
	if _, err := c.Write(append([]byte(protocolHeader), closeFrame[:9]...)); err != nil {
		t.Fatal(err)
	}
	// Waiting inside amqp091-go's channel.close: the append must not
	// follow it.
	res := appendAsync(c, ncs[0], method(5, 60, 40, u16(0), short(""), short("q"), []byte{0}))
	waitFor(t, "the append waiting", func() bool { return waiting(c) == 1 })
	if _, err := c.Write(closeFrame[9:]); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.sent || !errors.Is(r.err, errClosedForWrites) {
		t.Fatalf("append after channel.close: sent %v, %v; want nothing sent, errClosedForWrites", r.sent, r.err)
	}
	if r := <-appendAsync(c, ncs[0], method(5, 60, 40)); r.sent || !errors.Is(r.err, errClosedForWrites) {
		t.Fatalf("a later append: sent %v, %v", r.sent, r.err)
	}
	if w, _ := rc.record(); !bytes.Equal(bytes.Join(w, nil), append([]byte(protocolHeader), closeFrame...)) {
		t.Fatal("bytes after channel.close reached the socket")
	}
}

func TestAppendIsRefusedOnceAmqp091ClosesTheConnection(t *testing.T) {
	c, rc, ncs := trackedConn(5, 6)
	closeFrame := method(0, 10, 50, u16(200), short("bye"), u16(0), u16(0))
	if _, err := c.Write(append([]byte(protocolHeader), closeFrame...)); err != nil {
		t.Fatal(err)
	}
	for _, nc := range ncs {
		if r := <-appendAsync(c, nc, method(nc.id, 60, 40)); r.sent || !errors.Is(r.err, errClosedForWrites) {
			t.Fatalf("append on channel %d after connection.close: sent %v, %v", nc.id, r.sent, r.err)
		}
	}
	if w, _ := rc.record(); !bytes.Equal(bytes.Join(w, nil), append([]byte(protocolHeader), closeFrame...)) {
		t.Fatal("bytes after connection.close reached the socket")
	}
}

func TestAppendWaitingForABoundaryEndsWithTheConnection(t *testing.T) {
	c, _, ncs := trackedConn(3)
	if _, err := c.Write([]byte(protocolHeader + "\x01\x00")); err != nil {
		t.Fatal(err)
	}
	res := appendAsync(c, ncs[0], method(3, 85, 10, []byte{0}))
	waitFor(t, "the append waiting", func() bool { return waiting(c) == 1 })
	_ = c.Close()
	if r := <-res; r.sent || !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("append on a closed connection: sent %v, %v", r.sent, r.err)
	}
}

// feedConn serves reads from r.
type feedConn struct {
	net.Conn
	r io.Reader
}

func (f *feedConn) Read(p []byte) (int, error) { return f.r.Read(p) }

func TestGuardTapsANativeChannelsAnswersInOrder(t *testing.T) {
	selectOk := method(3, 85, 11)
	ret := method(3, 60, 50, u16(312), short("NO_ROUTE"), short("ex"), short("rk"))
	table := bytes.Join([][]byte{short("k"), {'S'}, u32(1), []byte("v")}, nil)
	retHeader := frame(2, 3, u16(60), u16(0), u64(2), u16(0x8000|0x2000|0x1000|0x0400|0x0080),
		short("text/plain"), u32(uint32(len(table))), table, []byte{2}, short("corr"), short("m-9"))
	in := bytes.Join([][]byte{
		selectOk,
		method(3, 60, 80, u64(1), []byte{0}), // ack 1
		method(4, 60, 60, short("ctag"), u64(1), []byte{0}, short(""), short("q")), // a delivery elsewhere
		method(3, 60, 80, u64(5), []byte{1}),                                       // ack up to 5
		method(3, 60, 120, u64(6), []byte{2}),                                      // nack 6, requeue set, not multiple
		ret, retHeader, frame(3, 3, []byte("xy")),
		method(3, 60, 80, u64(7), []byte{0}),
		method(3, 20, 41), // channel.close-ok: tapping ends
		method(3, 60, 80, u64(8), []byte{0}),
	}, nil)
	want := bytes.Replace(in, selectOk, heartbeatFrame[:], 1)
	for _, chunk := range []int{1, 5, 64, 4096} {
		nat := newNatives()
		nc := newNativeChan(3)
		nat.register(nc)
		g := newGuardedConn(&feedConn{r: bytes.NewReader(in)})
		g.natives = nat
		var out []byte
		buf := make([]byte, chunk)
		for {
			n, err := g.Read(buf)
			out = append(out, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("reads of %d: amqp091-go would read\n% x\nwant\n% x", chunk, out, want)
		}
		select {
		case <-nc.selected:
		default:
			t.Fatalf("reads of %d: select-ok not signalled", chunk)
		}
		close(nc.gone)
		var got []tapEvent
		for len(nc.events) > 0 {
			got = append(got, <-nc.events)
		}
		wantEvents := []tapEvent{
			{kind: tapAck, tag: 1},
			{kind: tapAck, tag: 5, multiple: true},
			{kind: tapNack, tag: 6},
			{kind: tapReturn, ret: &returned{code: 312, text: "NO_ROUTE", key: returnKey{"m-9", "ex", "rk"}}},
			{kind: tapAck, tag: 7},
		}
		if len(got) != len(wantEvents) {
			t.Fatalf("reads of %d: events %+v, want %+v", chunk, got, wantEvents)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], wantEvents[i]) {
				t.Fatalf("reads of %d: event %d is %+v, want %+v", chunk, i, got[i], wantEvents[i])
			}
		}
		if nat.reading.Load() != 0 {
			t.Fatalf("reads of %d: the channel is still tapped after its close-ok", chunk)
		}
	}
}

// confirmRecorder is a native confirm publisher without a channel, for
// driving its dispatcher by hand.
func confirmRecorder(n int) (*publisher, *sync.Map) {
	nat := newNatives()
	nc := newNativeChan(1)
	nat.register(nc)
	p := &publisher{confirm: true, done: make(chan struct{}), table: newPending(),
		nat: &nativeState{natives: nat, nc: nc, low: 1}}
	got := &sync.Map{}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		seq := seq
		p.table.add(seq, waiter{mandatory: true, key: returnKey{id: "r", routingKey: "q"}, done: func(c transport.Confirmation) {
			if _, dup := got.LoadOrStore(seq, c); dup {
				panic("answered twice")
			}
		}})
	}
	p.nat.issued.Store(uint64(n))
	return p, got
}

func outcome(got *sync.Map, seq uint64) transport.Outcome {
	c, ok := got.Load(seq)
	if !ok {
		return 0
	}
	return c.(transport.Confirmation).Outcome
}

func TestDispatcherAnswersOutOfOrderAndMultipleAnswersOnce(t *testing.T) {
	p, got := confirmRecorder(8)
	for _, ev := range []tapEvent{
		{kind: tapAck, tag: 3},
		{kind: tapNack, tag: 1},
		{kind: tapAck, tag: 4, multiple: true}, // answers 2 and 4
		{kind: tapReturn, ret: &returned{code: 312, text: "NO_ROUTE", key: returnKey{id: "r", routingKey: "q"}}},
		{kind: tapAck, tag: 5},
		{kind: tapAck, tag: 7},
		{kind: tapNack, tag: 1000, multiple: true}, // a tag past the last publish: up to 8
	} {
		p.onEvent(ev)
	}
	want := map[uint64]transport.Outcome{1: transport.Nacked, 2: transport.Acked, 3: transport.Acked, 4: transport.Acked,
		5: transport.Returned, 6: transport.Nacked, 7: transport.Acked, 8: transport.Nacked}
	for seq, w := range want {
		if o := outcome(got, seq); o != w {
			t.Errorf("publish %d: outcome %v, want %v", seq, o, w)
		}
	}
}

func TestDispatcherAnswersQueuedEventsBeforeLosingTheRest(t *testing.T) {
	p, got := confirmRecorder(3)
	p.nat.nc.events <- tapEvent{kind: tapAck, tag: 2, multiple: true}
	closes := make(chan *amqp.Error, 1)
	closes <- &amqp.Error{Code: 504, Reason: "CHANNEL_ERROR", Server: true}
	p.dispatchNative(closes)
	if o1, o2, o3 := outcome(got, 1), outcome(got, 2), outcome(got, 3); o1 != transport.Acked || o2 != transport.Acked || o3 != transport.Lost {
		t.Fatalf("outcomes %v %v %v, want acked acked lost", o1, o2, o3)
	}
	select {
	case <-p.done:
	default:
		t.Fatal("Done not closed")
	}
	if p.nat.natives.reading.Load() != 0 {
		t.Fatal("the ended channel is still registered")
	}
}

// TestChannelIDFindsAmqp091sChannelNumber holds the pinned amqp091-go to
// the one unexported field the native path reads: Channel.id, a uint16.
// If an upgrade moves or renames it, this fails here, before any publisher
// is opened (which would then refuse with the frames=amqp091 sentence).
func TestChannelIDFindsAmqp091sChannelNumber(t *testing.T) {
	f, ok := reflect.TypeOf((*amqp.Channel)(nil)).Elem().FieldByName("id")
	if !ok || f.Type.Kind() != reflect.Uint16 {
		t.Fatalf("amqp091-go's Channel has no uint16 field id (found %v, %v): the native publish path cannot learn its channel number", ok, f.Type)
	}
	// A zero Channel reads as channel 0, not an error.
	if id, err := channelID(&amqp.Channel{}); err != nil || id != 0 {
		t.Fatalf("channelID(zero Channel) = %d, %v; want 0, nil", id, err)
	}
}

// TestMessageIDReadsPastEveryPropertyBeforeIt: a returned message's id
// (how a return is matched to its publish) is found behind every property
// AMQP puts before it, including the two AceMQ never writes but another
// client's message may carry; a header without one, or cut short, gives "".
func TestMessageIDReadsPastEveryPropertyBeforeIt(t *testing.T) {
	flags := uint16(propContentType | propEncoding | propHeaders | propDeliveryMode | propPriority | propCorrelationID | propReplyTo | propExpiration | propMessageID)
	payload := bytes.Join([][]byte{
		u16(classBasic), u16(0), u64(5), u16(flags),
		short("application/json"), short("gzip"),
		u32(uint32(len(short("a")) + 2)), short("a"), {'t', 1},
		{2}, {4}, short("corr-1"), short("reply.q"), short("60000"), short("id-42"),
	}, nil)
	if got := messageID(payload); got != "id-42" {
		t.Fatalf("messageID = %q, want id-42", got)
	}
	if got := messageID(payload[:len(payload)-3]); got != "" {
		t.Fatalf("messageID of a cut header = %q, want empty", got)
	}
	noID := bytes.Join([][]byte{u16(classBasic), u16(0), u64(5), u16(propCorrelationID), short("corr-1")}, nil)
	if got := messageID(noID); got != "" {
		t.Fatalf("messageID without the property = %q, want empty", got)
	}
}
