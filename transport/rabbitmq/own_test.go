package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// fakeBroker is the broker's end of a net.Pipe, driven step by step by a
// test: it reads the client's bytes as frames and writes frames built from
// the AMQP 0-9-1 grammar (frame, method, u16... in frames_test.go).
type fakeBroker struct {
	t    *testing.T
	conn net.Conn
	fr   *frameReader
}

func newFakeBroker(t *testing.T) (*fakeBroker, net.Conn) {
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return &fakeBroker{t: t, conn: server, fr: newFrameReader(server, 1<<20)}, client
}

func (b *fakeBroker) send(frames ...[]byte) {
	b.t.Helper()
	if _, err := b.conn.Write(bytes.Join(frames, nil)); err != nil {
		b.t.Errorf("broker write: %v", err)
	}
}

// expect reads the next frame and checks its bytes, whole.
func (b *fakeBroker) expect(what string, want []byte) {
	b.t.Helper()
	f, err := b.fr.next()
	if err != nil {
		b.t.Errorf("%s: broker read: %v", what, err)
		return
	}
	got := frame(f.typ, f.channel, f.payload)
	if !bytes.Equal(got, want) {
		b.t.Errorf("%s:\n got % x\nwant % x", what, got, want)
	}
}

// next reads the next frame that is not a heartbeat.
func (b *fakeBroker) next() inFrame {
	b.t.Helper()
	for {
		f, err := b.fr.next()
		if err != nil {
			b.t.Errorf("broker read: %v", err)
			return inFrame{}
		}
		if f.typ != frameHeartbeat {
			return f
		}
	}
}

func longstr(s string) []byte { return append(u32(uint32(len(s))), s...) }

// start is connection.start offering mechanisms.
func start(mechanisms string) []byte {
	return method(0, 10, 10, []byte{0, 9}, u32(0), longstr(mechanisms), longstr("en_US"))
}

// handshake plays the broker's side of a handshake up to open-ok and
// returns the client's start-ok payload.
func (b *fakeBroker) handshake(mechanisms string, channelMax uint16, frameMax uint32, heartbeat uint16) []byte {
	b.t.Helper()
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(b.conn, hdr); err != nil || string(hdr) != protocolHeader {
		b.t.Errorf("protocol header % x, %v", hdr, err)
	}
	b.send(start(mechanisms))
	f := b.next()
	startOk := append([]byte(nil), f.payload...)
	b.send(method(0, 10, 30, u16(channelMax), u32(frameMax), u16(heartbeat)))
	return startOk
}

func dialFake(t *testing.T, conn net.Conn, prm ownParams) (*ownConn, error) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(wait))
	return openOwn(conn, prm)
}

// TestOwnHandshakeWritesTheGrammarsBytes checks every byte the client
// sends from the protocol header to connection.open, and what it agrees
// to: the smaller of each limit, 2047 channels when the broker sets none.
func TestOwnHandshakeWritesTheGrammarsBytes(t *testing.T) {
	b, client := newFakeBroker(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		startOk := b.handshake("AMQPLAIN PLAIN", 0, 131072, 60)
		a := args{p: startOk[4:]}
		props := a.longstr()
		if mech := a.shortstr(); mech != "PLAIN" {
			t.Errorf("mechanism %q, want PLAIN", mech)
		}
		if resp := string(a.longstr()); resp != "\x00guest\x00s3cret" {
			t.Errorf("PLAIN response %q", resp)
		}
		if loc := a.shortstr(); loc != "en_US" || !a.ok() || len(a.p) != 0 {
			t.Errorf("locale %q, %d bytes left, ok %v", loc, len(a.p), a.ok())
		}
		for _, want := range []string{"connection_name", "my-service", "capabilities", "connection.blocked", "publisher_confirms", "basic.nack", "authentication_failure_close"} {
			if !bytes.Contains(props, []byte(want)) {
				t.Errorf("client properties lack %q: %q", want, props)
			}
		}
		b.expect("tune-ok", method(0, 10, 31, u16(2047), u32(131072), u16(10)))
		b.expect("open", method(0, 10, 40, short("/vh"), []byte{0}, []byte{0}))
		b.send(method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{login: ownLogin{user: "guest", password: "s3cret"}, vhost: "/vh",
		properties: map[string]any{"connection_name": "my-service"}, heartbeat: 10 * time.Second})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if oc.frameMax != 131072 || oc.chanMax != 2047 || oc.heartbeat != 10*time.Second {
		t.Fatalf("agreed frame_max %d, channel_max %d, heartbeat %s", oc.frameMax, oc.chanMax, oc.heartbeat)
	}
	closeFake(t, b, oc)
}

// closeFake closes oc, playing the broker's close-ok.
func closeFake(t *testing.T, b *fakeBroker, oc *ownConn) {
	t.Helper()
	go func() {
		for {
			f, err := b.fr.next()
			if err != nil {
				return
			}
			if class, m, _, ok := methodID(f.payload); f.typ == frameMethod && ok && class == 10 && m == 50 {
				b.send(method(0, 10, 51))
				return
			}
		}
	}()
	if err := oc.closeWithin(wait); err != nil {
		t.Fatal(err)
	}
}

func TestOwnExternalLoginSendsAnEmptyResponse(t *testing.T) {
	b, client := newFakeBroker(t)
	go func() {
		startOk := b.handshake("PLAIN EXTERNAL", 10, 8192, 0)
		a := args{p: startOk[4:]}
		a.longstr()
		if mech, resp := a.shortstr(), a.longstr(); mech != "EXTERNAL" || len(resp) != 0 || !a.ok() {
			t.Errorf("mechanism %q response %q; want EXTERNAL and nothing", mech, resp)
		}
		b.expect("tune-ok", method(0, 10, 31, u16(10), u32(8192), u16(0)))
		b.next() // open
		b.send(method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{login: ownLogin{external: true}, vhost: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if oc.heartbeat != 0 {
		t.Fatalf("heartbeat %s; both sides said 0, so none", oc.heartbeat)
	}
	closeFake(t, b, oc)
}

func TestOwnLoginRefusalsSayWhy(t *testing.T) {
	t.Run("mechanism not offered", func(t *testing.T) {
		b, client := newFakeBroker(t)
		go func() {
			hdr := make([]byte, 8)
			_, _ = io.ReadFull(b.conn, hdr)
			b.send(start("AMQPLAIN"))
		}()
		_, err := dialFake(t, client, ownParams{login: ownLogin{external: true}})
		if err == nil || !strings.Contains(err.Error(), "EXTERNAL") || !strings.Contains(err.Error(), "AMQPLAIN") {
			t.Fatalf("error %v; want one naming EXTERNAL and what the broker offers", err)
		}
	})
	t.Run("closed with 403", func(t *testing.T) {
		b, client := newFakeBroker(t)
		go func() {
			hdr := make([]byte, 8)
			_, _ = io.ReadFull(b.conn, hdr)
			b.send(start("PLAIN"))
			b.next()
			b.send(method(0, 10, 50, u16(403), short("ACCESS_REFUSED - Login was refused"), u16(0), u16(0)))
			b.expect("close-ok", method(0, 10, 51))
		}()
		_, err := dialFake(t, client, ownParams{login: ownLogin{user: "u", password: "wrong"}})
		var te *transport.Error
		if !errors.As(err, &te) || te.Code != 403 || !te.Server || !te.Connection || !strings.Contains(te.Reason, "ACCESS_REFUSED") {
			t.Fatalf("error %#v; want the broker's 403 as a *transport.Error", err)
		}
	})
	t.Run("socket closed at login", func(t *testing.T) {
		b, client := newFakeBroker(t)
		go func() {
			hdr := make([]byte, 8)
			_, _ = io.ReadFull(b.conn, hdr)
			b.send(start("PLAIN"))
			b.next()
			_ = b.conn.Close()
		}()
		_, err := dialFake(t, client, ownParams{login: ownLogin{user: "u", password: "wrong"}})
		if !errors.Is(err, errLoginRefused) {
			t.Fatalf("error %v; want errLoginRefused", err)
		}
	})
	t.Run("not AMQP 0-9-1", func(t *testing.T) {
		b, client := newFakeBroker(t)
		go func() {
			hdr := make([]byte, 8)
			_, _ = io.ReadFull(b.conn, hdr)
			_, _ = b.conn.Write([]byte("AMQP\x00\x00\x09\x01"))
		}()
		_, err := dialFake(t, client, ownParams{})
		if !errors.Is(err, errProtocolRefused) {
			t.Fatalf("error %v; want errProtocolRefused", err)
		}
	})
}

// openFake handshakes and returns the open connection.
func openFake(t *testing.T, frameMax uint32) (*fakeBroker, *ownConn) {
	t.Helper()
	b, client := newFakeBroker(t)
	go func() {
		b.handshake("PLAIN", 0, frameMax, 0)
		b.next() // tune-ok
		b.next() // open
		b.send(method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{login: ownLogin{user: "u", password: "p"}, vhost: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return b, oc
}

// openPublisherFake opens a confirming publisher on channel 1.
func openPublisherFake(t *testing.T, b *fakeBroker, oc *ownConn) *ownPublisher {
	t.Helper()
	go func() {
		b.expect("channel.open", method(1, 20, 10, short("")))
		b.expect("confirm.select", method(1, 85, 10, []byte{0}))
		b.send(method(1, 20, 11, longstr("")), method(1, 85, 11))
	}()
	p, err := oc.publisher(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type outcomes struct {
	mu  sync.Mutex
	got map[int]transport.Confirmation
	n   chan struct{}
}

func (o *outcomes) done(i int) transport.ConfirmFunc {
	return func(c transport.Confirmation) {
		o.mu.Lock()
		if _, dup := o.got[i]; dup {
			panic("answered twice")
		}
		o.got[i] = c
		o.mu.Unlock()
		o.n <- struct{}{}
	}
}

func (o *outcomes) wait(t *testing.T, n int) map[int]transport.Confirmation {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-o.n:
		case <-time.After(wait):
			t.Fatalf("%d of %d answers", i, n)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got
}

// TestOwnPublisherAnswersEachPublishAsTheBrokerSaid: acks out of order,
// multiple acks and nacks, a tag past the last publish, a basic.return
// before its ack, then the broker's channel.close answering the rest Lost
// with its code, and a close-ok sent back.
func TestOwnPublisherAnswersEachPublishAsTheBrokerSaid(t *testing.T) {
	b, oc := openFake(t, 4096)
	p := openPublisherFake(t, b, oc)
	o := &outcomes{got: map[int]transport.Confirmation{}, n: make(chan struct{}, 16)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		for i := 0; i < 10; i++ {
			for j := 0; j < 2; j++ { // publish and content header (no body)
				b.next()
			}
		}
	}()
	for i := 1; i <= 10; i++ {
		msg := &transport.Message{RoutingKey: "q", Mandatory: i == 5, Properties: transport.Properties{MessageID: "m5"}}
		if err := p.Publish(context.Background(), msg, o.done(i)); err != nil {
			t.Fatal(err)
		}
	}
	<-read
	b.send(
		method(1, 60, 80, u64(3), []byte{0}),
		method(1, 60, 120, u64(1), []byte{0}),
		method(1, 60, 80, u64(4), []byte{1}), // answers 2 and 4
		method(1, 60, 50, u16(312), short("NO_ROUTE"), short(""), short("q")),
		frame(2, 1, u16(60), u16(0), u64(0), u16(propMessageID), short("m5")),
		method(1, 60, 80, u64(5), []byte{0}),
		method(1, 60, 80, u64(7), []byte{0}),
		method(1, 60, 120, u64(8), []byte{1}), // answers 6 and 8
	)
	got := o.wait(t, 8)
	want := map[int]transport.Outcome{1: transport.Nacked, 2: transport.Acked, 3: transport.Acked, 4: transport.Acked,
		5: transport.Returned, 6: transport.Nacked, 7: transport.Acked, 8: transport.Nacked}
	for i, w := range want {
		if got[i].Outcome != w {
			t.Errorf("publish %d: %v, want %v", i, got[i].Outcome, w)
		}
	}
	if got[5].ReplyCode != 312 || got[5].ReplyText != "NO_ROUTE" {
		t.Errorf("the return: %+v", got[5])
	}
	go b.send(method(1, 20, 40, u16(404), short("NOT_FOUND - no exchange 'x'"), u16(60), u16(40)))
	b.expect("channel.close-ok", method(1, 20, 41))
	got = o.wait(t, 2)
	for _, i := range []int{9, 10} {
		if got[i].Outcome != transport.Lost || transport.Code(got[i].Err) != 404 {
			t.Errorf("publish %d after the broker's close: %+v; want Lost with 404", i, got[i])
		}
	}
	<-p.Done()
	err := p.Publish(context.Background(), &transport.Message{}, func(transport.Confirmation) { t.Error("answered") })
	if !errors.Is(err, transport.ErrNotWritten) || transport.Code(err) != 404 {
		t.Fatalf("publish after the close: %v", err)
	}
	closeFake(t, b, oc)
}

// TestOwnConnectionCloseFromTheBrokerEndsEverything: blocked and unblocked
// are reported, then connection.close is answered with close-ok, pending
// publishes end Lost with 320, and nothing is written after the close-ok.
func TestOwnConnectionCloseFromTheBrokerEndsEverything(t *testing.T) {
	b, client := newFakeBroker(t)
	blocked := make(chan string, 2)
	go func() {
		b.handshake("PLAIN", 0, 4096, 0)
		b.next()
		b.next()
		b.send(method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{onBlocked: func(active bool, reason string) {
		if active {
			blocked <- reason
		} else {
			blocked <- "unblocked"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := openPublisherFake(t, b, oc)
	o := &outcomes{got: map[int]transport.Confirmation{}, n: make(chan struct{}, 4)}
	read := make(chan struct{})
	go func() { b.next(); b.next(); close(read) }()
	if err := p.Publish(context.Background(), &transport.Message{RoutingKey: "q"}, o.done(1)); err != nil {
		t.Fatal(err)
	}
	<-read
	b.send(method(0, 10, 60, short("low on memory")), method(0, 10, 61))
	if r1, r2 := <-blocked, <-blocked; r1 != "low on memory" || r2 != "unblocked" {
		t.Fatalf("blocked notices %q, %q", r1, r2)
	}
	go b.send(method(0, 10, 50, u16(320), short("CONNECTION_FORCED - closed via management plugin"), u16(0), u16(0)))
	b.expect("connection.close-ok", method(0, 10, 51))
	if got := o.wait(t, 1); got[1].Outcome != transport.Lost || transport.Code(got[1].Err) != 320 {
		t.Fatalf("pending publish: %+v; want Lost with 320", got[1])
	}
	<-oc.done
	var te *transport.Error
	if !errors.As(oc.Err(), &te) || te.Code != 320 || !te.Connection || !te.Server {
		t.Fatalf("Err %#v; want the broker's 320 connection close", oc.Err())
	}
	if err := p.Publish(context.Background(), &transport.Message{}, o.done(2)); !errors.Is(err, transport.ErrNotWritten) {
		t.Fatalf("publish after the close: %v", err)
	}
	if _, err := oc.publisher(context.Background(), true); transport.Code(err) != 320 {
		t.Fatalf("a publisher after the close: %v", err)
	}
	if err := oc.closeWithin(wait); err != nil {
		t.Fatal(err)
	}
}

// TestOwnHeartbeatsBothWays: the client sends heartbeats, and drops a
// connection on which the broker has sent nothing for two intervals.
func TestOwnHeartbeatsBothWays(t *testing.T) {
	b, client := newFakeBroker(t)
	go func() {
		b.handshake("PLAIN", 0, 4096, 1)
		b.next()
		b.next()
		b.send(method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.fr.next()
	if err != nil || f.typ != frameHeartbeat || f.channel != 0 || len(f.payload) != 0 {
		t.Fatalf("first frame after open: %+v, %v; want a heartbeat", f, err)
	}
	go func() { // keep reading, never answer
		for {
			if _, err := b.fr.next(); err != nil {
				return
			}
		}
	}()
	select {
	case <-oc.done:
	case <-time.After(wait):
		t.Fatal("a silent broker was not dropped")
	}
	if err := oc.Err(); err == nil || !strings.Contains(err.Error(), "heartbeat") {
		t.Fatalf("Err %v; want one naming the heartbeat", err)
	}
	_ = oc.closeWithin(0)
}

func TestOwnFrameReaderRefusesWhatTheGrammarDoesNot(t *testing.T) {
	for name, c := range map[string]struct {
		in   []byte
		want string
	}{
		"over frame_max": {frame(1, 0, make([]byte, 5000)), "over the negotiated frame_max"},
		"bad frame end":  {append(frame(8, 0)[:7], 0xAB), "frame-end"},
		"cut short":      {frame(1, 0, make([]byte, 10))[:12], "unexpected EOF"},
	} {
		fr := newFrameReader(bytes.NewReader(c.in), 4096-8)
		if _, err := fr.next(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, c.want)
		}
	}
}

// method builds a method frame: class, method, arguments.
func method(ch, class, m uint16, args ...[]byte) []byte {
	return frame(1, ch, append([][]byte{u16(class), u16(m)}, args...)...)
}
