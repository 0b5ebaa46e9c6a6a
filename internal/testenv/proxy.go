package testenv

import (
	"io"
	"net"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a broker until Kill, which drops every
// one of them at once (the broker sees the sockets close, as when a process
// dies) and refuses new ones. Mute drops the broker's bytes instead of
// forwarding them, so the client hears nothing while its writes still go
// through.
type Proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
	once  sync.Once
	muted atomic.Bool
}

// StartProxy starts a proxy to the host of the AMQP URL url and returns
// it with url rewritten to reach the broker through it. The test's cleanup
// kills it.
func StartProxy(t testing.TB, url string) (*Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatalf("testenv: cannot read the broker URL %q: %v", url, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	p.wg.Add(1)
	go p.accept(u.Host)
	t.Cleanup(p.Kill)
	via := *u
	via.Host = ln.Addr().String()
	return p, via.String()
}

func (p *Proxy) accept(target string) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); _ = u.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(mutable{c, &p.muted}, u); _ = c.Close() }()
	}
}

// Mute drops everything the broker sends from now on; it reports true.
func (p *Proxy) Mute() bool { p.muted.Store(true); return true }

// Kill closes the listener and every forwarded connection (once), and
// waits for the forwarding goroutines to end.
func (p *Proxy) Kill() {
	p.once.Do(func() {
		_ = p.ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
}

// mutable forwards writes unless muted, when it drops them.
type mutable struct {
	w     io.Writer
	muted *atomic.Bool
}

func (m mutable) Write(b []byte) (int, error) {
	if m.muted.Load() {
		return len(b), nil
	}
	return m.w.Write(b)
}
