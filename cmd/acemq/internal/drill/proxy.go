package drill

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cutProxy is the soak's own TCP path to the broker: the drill's Conn dials
// it, it dials the broker, and it copies bytes both ways. It lets the drill
// cut every connection at once on cue (the client meets an ended TCP
// connection, no connection.close), with any broker URL and no management
// API; and because it dials the broker itself it knows the address the
// broker sees each connection come from, which names the connection in the
// management API the moment the broker accepts it (see mgmtCloser).
//
// Its goroutines and sockets are the drill process's own, so they are in
// the soak's samples: two sockets and two goroutines per connection through
// it, and one goroutine accepting.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	pairs  map[*proxyPair]struct{}
	closed bool
}

// proxyPair is one connection through the proxy: the client's side and
// the proxy's own connection to the broker.
type proxyPair struct {
	client, broker net.Conn
	once           sync.Once
}

func (p *proxyPair) close() {
	p.once.Do(func() {
		_ = p.client.Close()
		_ = p.broker.Close()
	})
}

// newCutProxy listens on a loopback port of its own and forwards every
// connection to target (host:port).
func newCutProxy(target string) (*cutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("acemq: the soak cannot listen on a loopback port for its connection-cutting proxy: %w", err)
	}
	p := &cutProxy{ln: ln, target: target, pairs: map[*proxyPair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is the host:port the drill's Conn dials instead of the broker's.
func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // the listener was closed by stop
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the broker for client and copies both ways until either
// side ends, then closes both.
func (p *cutProxy) forward(client net.Conn) {
	defer p.wg.Done()
	broker, err := net.DialTimeout("tcp", p.target, 30*time.Second)
	if err != nil {
		_ = client.Close() // the Conn sees a failed connect and tries again
		return
	}
	pair := &proxyPair{client: client, broker: broker}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pair.close()
		return
	}
	p.pairs[pair] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pairs, pair)
		p.mu.Unlock()
	}()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		copyPlain(broker, client)
		pair.close()
	}()
	copyPlain(client, broker)
	pair.close()
}

// copyPlain copies src to dst through a buffer of its own. io.Copy between
// two TCP connections would splice on Linux, through pipes the runtime
// pools and frees only on a GC: they show in the soak's fd samples as
// growth that is the proxy's, not the library's.
func copyPlain(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

// cut closes every connection through the proxy, both sides, and returns
// how many there were.
func (p *cutProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pair := range p.pairs {
		pair.close()
	}
	return len(p.pairs)
}

// brokerSides returns, for each live connection through the proxy, the
// address the broker sees it come from (the proxy's local address).
func (p *cutProxy) brokerSides() []net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]net.Addr, 0, len(p.pairs))
	for pair := range p.pairs {
		out = append(out, pair.broker.LocalAddr())
	}
	return out
}

// stop closes the listener and every connection and waits for the
// proxy's goroutines.
func (p *cutProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
}

// throughProxy returns rawURL with its host and port replaced by
// proxyAddr, and the host:port it named (the proxy's target). An amqps URL
// keeps verifying the broker's certificate against its own host name
// (server_name_indication), since the Conn now dials a loopback address.
func throughProxy(rawURL, proxyAddr string) (string, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("acemq: the broker URL does not parse: %v", err)
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "amqp":
		port = "5672"
	case u.Scheme == "amqps":
		port = "5671"
	default:
		return "", "", fmt.Errorf("acemq: the soak takes an amqp:// or amqps:// URL, got scheme %q", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		host = "localhost"
	}
	target := net.JoinHostPort(host, port)
	if u.Scheme == "amqps" {
		q := u.Query()
		if q.Get("server_name_indication") == "" {
			q.Set("server_name_indication", host)
			u.RawQuery = q.Encode()
		}
	}
	u.Host = proxyAddr
	return u.String(), target, nil
}

// connectionFrom reports whether name, a broker's connection name
// ("client-host:port -> broker-host:port"), is the connection that came
// from addr.
func connectionFrom(name string, addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	from, _, found := strings.Cut(name, " -> ")
	if !found {
		return false
	}
	i := strings.LastIndexByte(from, ':')
	if i < 0 {
		return false
	}
	ip := net.ParseIP(strings.Trim(from[:i], "[]"))
	return ip != nil && ip.Equal(ta.IP) && from[i+1:] == fmt.Sprint(ta.Port)
}
