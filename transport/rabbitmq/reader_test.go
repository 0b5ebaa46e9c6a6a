package rabbitmq

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// The owned connection's one reader answers every publisher; it must
// never wait for user code or for a writer.

// openPublisherOn opens a confirming publisher on channel ch of oc.
func openPublisherOn(t *testing.T, b *fakeBroker, oc *ownConn, ch uint16) *ownPublisher {
	t.Helper()
	go func() {
		b.expect("channel.open", method(ch, 20, 10, short("")))
		b.expect("confirm.select", method(ch, 85, 10, []byte{0}))
		b.send(method(ch, 20, 11, longstr("")), method(ch, 85, 11))
	}()
	p, err := oc.publisher(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.id != ch {
		t.Fatalf("publisher opened on channel %d, want %d", p.id, ch)
	}
	return p
}

// A slow blocked-notice callback (user code: a log handler) does not
// stall the acks read after the notice.
func TestASlowBlockedCallbackDoesNotStallTheAcks(t *testing.T) {
	b, client := newFakeBroker(t)
	go func() {
		b.handshake("PLAIN", 0, 4096, 0)
		b.next()
		b.next()
		b.send(method(0, 10, 41, short("")))
	}()
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	oc, err := dialFake(t, client, ownParams{onBlocked: func(bool, string) {
		entered <- struct{}{}
		<-release
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); closeFake(t, b, oc) }()
	p := openPublisherOn(t, b, oc, 1)
	read := make(chan struct{})
	go func() { b.next(); b.next(); close(read) }()
	acked := make(chan transport.Confirmation, 1)
	if err := p.Publish(context.Background(), &transport.Message{RoutingKey: "q"}, func(cf transport.Confirmation) { acked <- cf }); err != nil {
		t.Fatal(err)
	}
	<-read
	b.send(method(0, 10, 60, short("low on memory")), method(1, 60, 80, u64(1), []byte{0}))
	<-entered // the callback runs, and does not return
	select {
	case cf := <-acked:
		if cf.Outcome != transport.Acked {
			t.Fatalf("the publish was answered %v", cf.Outcome)
		}
	case <-time.After(wait):
		t.Fatal("the ack read after a blocked notice waited for the notice's callback")
	}
}

// The broker closing a channel while a write holds that channel (the
// broker is not reading it) does not stall the reader: an ack for another
// channel, read after the close, is answered.
func TestTheBrokersChannelCloseDoesNotMakeTheReaderWaitForAWriter(t *testing.T) {
	b, oc := openFake(t, 4096)
	p1 := openPublisherOn(t, b, oc, 1)
	p2 := openPublisherOn(t, b, oc, 2)
	read := make(chan struct{})
	go func() { b.next(); b.next(); close(read) }()
	acked := make(chan transport.Confirmation, 1)
	if err := p2.Publish(context.Background(), &transport.Message{RoutingKey: "q"}, func(cf transport.Confirmation) { acked <- cf }); err != nil {
		t.Fatal(err)
	}
	<-read
	// p1's publish: the broker reads its frame header and no more, so the
	// write is under way and blocks (net.Pipe takes nothing unread).
	go func() {
		_ = p1.Publish(context.Background(), &transport.Message{RoutingKey: "q"}, func(transport.Confirmation) {})
	}()
	if _, err := io.ReadFull(b.conn, make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	b.send(method(1, 20, 40, u16(406), short("PRECONDITION_FAILED"), u16(60), u16(40)), method(2, 60, 80, u64(1), []byte{0}))
	select {
	case cf := <-acked:
		if cf.Outcome != transport.Acked {
			t.Fatalf("channel 2's publish was answered %v", cf.Outcome)
		}
	case <-time.After(wait):
		t.Fatal("the reader waited for channel 1's writer to answer the broker's channel.close")
	}
	_ = oc.closeWithin(100 * time.Millisecond)
}

// A heartbeat may come before connection.open-ok (RabbitMQ sends one after
// tune-ok when open is slow); the handshake takes it.
func TestTheHandshakeTakesAHeartbeatBeforeOpenOk(t *testing.T) {
	b, client := newFakeBroker(t)
	go func() {
		b.handshake("PLAIN", 0, 4096, 10)
		b.next() // tune-ok
		b.next() // open
		b.send(frame(frameHeartbeat, 0), method(0, 10, 41, short("")))
	}()
	oc, err := dialFake(t, client, ownParams{heartbeat: 10 * time.Second})
	if err != nil {
		t.Fatalf("the handshake refused a heartbeat before open-ok: %v", err)
	}
	closeFake(t, b, oc)
}

// The heartbeat the client answers tune with: off when asked for a
// negative interval, whatever the broker proposes (AMQP lets the client
// choose 0); a positive interval rounded up to whole seconds, never to 0
// (which would take the broker's).
func TestTheHeartbeatTuneOkAnswers(t *testing.T) {
	for _, c := range []struct {
		asked    time.Duration
		proposed uint16
		want     uint16
	}{
		{-1, 60, 0},
		{-time.Second, 0, 0},
		{0, 60, 60},
		{500 * time.Millisecond, 60, 1},
		{1500 * time.Millisecond, 60, 2},
		{10 * time.Second, 5, 5},
		{10 * time.Second, 0, 10},
	} {
		b, client := newFakeBroker(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.handshake("PLAIN", 0, 4096, c.proposed)
			b.expect("tune-ok", method(0, 10, 31, u16(2047), u32(4096), u16(c.want)))
			b.next()
			b.send(method(0, 10, 41, short("")))
		}()
		oc, err := dialFake(t, client, ownParams{heartbeat: c.asked})
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if oc.heartbeat != time.Duration(c.want)*time.Second {
			t.Errorf("asked %s, proposed %ds: heartbeat %s, want %ds", c.asked, c.proposed, oc.heartbeat, c.want)
		}
		closeFake(t, b, oc)
	}
}
