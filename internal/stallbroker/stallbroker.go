// Package stallbroker is a broker that stops reading, for tests of write
// deadlines: a TCP server on loopback that speaks just enough AMQP 0-9-1
// (the handshake, channel.open, confirm.select, basic.qos) for a client to
// connect and open publishing channels, and that stops reading a
// connection for good at the first basic.publish it sees on it. Its
// receive buffer is small, so the client's socket buffers fill and its
// write blocks, as against a broker whose process was stopped.
package stallbroker

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// Broker is a running stall broker. Its methods are safe for concurrent
// use.
type Broker struct {
	ln      net.Listener
	tls     *tls.Config   // nil: plain TCP
	stalled chan struct{} // one value per connection that stopped reading
	quit    chan struct{} // closed when the test ends

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// Start runs a broker until the test ends.
func Start(t testing.TB) *Broker { return start(t, nil) }

// StartTLS runs a broker that speaks TLS with cfg (amqps://; URL still
// says amqp://, for the test to rewrite) until the test ends.
func StartTLS(t testing.TB, cfg *tls.Config) *Broker { return start(t, cfg) }

func start(t testing.TB, cfg *tls.Config) *Broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{ln: ln, tls: cfg, stalled: make(chan struct{}, 64), quit: make(chan struct{})}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.stop)
	return b
}

// URL is an amqp:// URL for the broker (any user and password log in).
func (b *Broker) URL() string {
	return "amqp://guest:guest@" + b.ln.Addr().String() + "/"
}

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// Stalled receives a value each time a connection stops reading (at its
// first basic.publish: the client is then inside the write of it).
func (b *Broker) Stalled() <-chan struct{} { return b.stalled }

func (b *Broker) stop() {
	close(b.quit)
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *Broker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10)
		}
		if b.tls != nil {
			c = tls.Server(c, b.tls)
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

// serve answers one connection until its first basic.publish, then reads
// nothing more; the connection ends when the client or the test closes it.
func (b *Broker) serve(c net.Conn) {
	defer b.wg.Done()
	defer c.Close()
	r := bufio.NewReaderSize(c, 512)
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return
	}
	// connection.start: 0-9, no server properties, PLAIN, en_US.
	if !send(c, 0, 10, 10, []byte{0, 9}, u32(0), longstr("PLAIN"), longstr("en_US")) {
		return
	}
	for {
		typ, ch, payload, err := readFrame(r)
		if err != nil {
			return
		}
		if typ != 1 || len(payload) < 4 {
			continue // heartbeats, content headers and bodies
		}
		class, method := binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:])
		ok := true
		switch {
		case class == 10 && method == 11: // start-ok → tune: 2047 channels, 128 KiB frames, no heartbeat
			ok = send(c, 0, 10, 30, u16(2047), u32(131072), u16(0))
		case class == 10 && method == 40: // open → open-ok
			ok = send(c, 0, 10, 41, []byte{0})
		case class == 10 && method == 50: // close → close-ok
			send(c, 0, 10, 51)
			return
		case class == 20 && method == 10: // channel.open → open-ok
			ok = send(c, ch, 20, 11, u32(0))
		case class == 20 && method == 40: // channel.close → close-ok
			ok = send(c, ch, 20, 41)
		case class == 85 && method == 10: // confirm.select → select-ok
			ok = send(c, ch, 85, 11)
		case class == 60 && method == 10: // basic.qos → qos-ok
			ok = send(c, ch, 60, 11)
		case class == 60 && method == 40: // basic.publish: stop reading
			select {
			case b.stalled <- struct{}{}:
			default:
			}
			<-b.quit // until the test ends
			return
		}
		if !ok {
			return
		}
	}
}

func readFrame(r *bufio.Reader) (typ byte, ch uint16, payload []byte, err error) {
	var h [7]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return
	}
	size := binary.BigEndian.Uint32(h[3:])
	payload = make([]byte, size+1)
	if _, err = io.ReadFull(r, payload); err != nil {
		return
	}
	return h[0], binary.BigEndian.Uint16(h[1:]), payload[:size], nil
}

// send writes one method frame; it reports whether the write succeeded.
func send(c net.Conn, ch, class, method uint16, args ...[]byte) bool {
	p := append(u16(class), u16(method)...)
	for _, a := range args {
		p = append(p, a...)
	}
	f := []byte{1}
	f = append(f, u16(ch)...)
	f = append(f, u32(uint32(len(p)))...)
	f = append(f, p...)
	f = append(f, 0xCE)
	_, err := c.Write(f)
	return err == nil
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func longstr(s string) []byte { return append(u32(uint32(len(s))), s...) }
