package rabbitmq

import (
	"bytes"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// FuzzOwnFrameReader feeds arbitrary broker bytes to the owned
// connection's frame reader and dispatcher, with a confirming publisher on
// channel 1 holding unanswered publishes: nothing may panic, read past a
// frame, or answer a publish twice.
func FuzzOwnFrameReader(f *testing.F) {
	f.Add(bytes.Join([][]byte{
		method(1, 60, 80, u64(2), []byte{1}),
		method(1, 60, 50, u16(312), short("NO_ROUTE"), short(""), short("q")),
		frame(2, 1, u16(60), u16(0), u64(3), u16(propMessageID), short("m")),
		frame(3, 1, []byte("abc")),
		method(1, 60, 120, u64(9), []byte{0}),
		method(0, 10, 60, short("memory")),
		method(1, 20, 20, []byte{1}),
		method(1, 20, 40, u16(406), short("PRECONDITION_FAILED"), u16(0), u16(0)),
		frame(8, 0),
		method(0, 10, 50, u16(320), short("CONNECTION_FORCED"), u16(0), u16(0)),
	}, nil))
	f.Add(frame(2, 1, u16(60), u16(0), u64(0), u16(0xFFFF)))
	f.Add(method(1, 60, 50, u16(1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &ownConn{w: newHeldConn(&recordingConn{}), frameMax: 4096, chanMax: 8,
			chans: map[uint16]*ownPublisher{}, secretOk: make(chan struct{}, 1), done: make(chan struct{}),
			onBlocked: func(bool, string) {}}
		p := newOwnPublisher(c, 1, true)
		c.chans[1] = p
		answered := map[uint64]int{}
		for seq := uint64(1); seq <= 8; seq++ {
			p.table.add(seq, waiter{done: func(transport.Confirmation) { answered[seq]++ }, mandatory: seq%2 == 0, key: returnKey{id: "m", routingKey: "q"}})
		}
		p.issued.Store(8)
		p.seq = 8
		c.fr = newFrameReader(bytes.NewReader(in), c.frameMax-8)
		for {
			fr, err := c.fr.next()
			if err != nil {
				break
			}
			if len(fr.payload) > c.frameMax-8 {
				t.Fatalf("a frame of %d bytes passed frame_max %d", len(fr.payload), c.frameMax)
			}
			if c.dispatch(fr) != nil {
				break
			}
		}
		c.end(nil)
		for seq, n := range answered {
			if n != 1 {
				t.Fatalf("publish %d answered %d times", seq, n)
			}
		}
		if len(answered) != 8 {
			t.Fatalf("%d of 8 publishes answered once the connection ended", len(answered))
		}
	})
}
