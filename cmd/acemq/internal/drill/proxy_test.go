package drill

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/url"
	"testing"
	"time"
)

// TestConnectionFromMatchesTheBrokersConnectionName: RabbitMQ names a
// connection "client-host:port -> broker-host:port", IPv6 hosts in
// brackets; only the client side names where it came from.
func TestConnectionFromMatchesTheBrokersConnectionName(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 34628}
	v6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 5000}
	for _, c := range []struct {
		name string
		addr net.Addr
		want bool
	}{
		{"127.0.0.1:34628 -> 127.0.0.1:25165", v4, true},
		{"127.0.0.1:34629 -> 127.0.0.1:25165", v4, false},
		{"10.0.0.1:34628 -> 127.0.0.1:25165", v4, false},
		{"127.0.0.1:5672 -> 127.0.0.1:34628", v4, false},
		{"[::1]:5000 -> [::1]:5672", v6, true},
		{"::1:5000 -> ::1:5672", v6, true},
		{"[::1]:5000 -> [::1]:5672", v4, false},
		{"no arrow here", v4, false},
		{"127.0.0.1:34628 -> x", &net.UnixAddr{Name: "x"}, false},
	} {
		if got := connectionFrom(c.name, c.addr); got != c.want {
			t.Errorf("connectionFrom(%q, %v) = %v, want %v", c.name, c.addr, got, c.want)
		}
	}
}

func TestThroughProxyKeepsTheURLButTheHost(t *testing.T) {
	for _, c := range []struct{ in, target, sni string }{
		{"amqp://u:p@broker.example:5673/vh", "broker.example:5673", ""},
		{"amqp://u:p@broker.example/vh", "broker.example:5672", ""},
		{"amqps://u:p@broker.example/vh", "broker.example:5671", "broker.example"},
		{"amqps://u:p@broker.example:5671/vh?server_name_indication=other", "broker.example:5671", "other"},
	} {
		out, target, err := throughProxy(c.in, "127.0.0.1:9999")
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		pw, _ := u.User.Password()
		if target != c.target || u.Host != "127.0.0.1:9999" || u.Path != "/vh" || u.User.Username() != "u" || pw != "p" || u.Query().Get("server_name_indication") != c.sni {
			t.Errorf("throughProxy(%q) = %q, target %q; want host 127.0.0.1:9999, the same credentials and vhost, target %q, server_name_indication %q", c.in, out, target, c.target, c.sni)
		}
	}
	if _, _, err := throughProxy("http://broker/", "127.0.0.1:1"); err == nil {
		t.Fatal("an http URL was taken")
	}
}

// TestCutProxyForwardsNamesAndCutsEveryConnection: bytes pass both ways;
// the addresses it reports are the ones the server sees the connections
// come from; a cut ends every connection; stop leaves no goroutine behind
// (goleak in TestMain).
func TestCutProxyForwardsNamesAndCutsEveryConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan net.Addr, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			seen <- c.RemoteAddr()
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // echo until the proxy ends it
		}
	}()
	defer func() { _ = ln.Close(); <-done }()
	p, err := newCutProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	var clients []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "ping\n" {
			t.Fatalf("echo through the proxy: %q, %v", line, err)
		}
		clients = append(clients, c)
	}
	sides := p.brokerSides()
	if len(sides) != 2 {
		t.Fatalf("brokerSides = %v, want 2 addresses", sides)
	}
	for i := 0; i < 2; i++ {
		a := <-seen
		name := a.String() + " -> " + ln.Addr().String()
		if !connectionFrom(name, sides[0]) && !connectionFrom(name, sides[1]) {
			t.Fatalf("the server saw a connection from %v, the proxy reports %v", a, sides)
		}
	}
	if n := p.cut(); n != 2 {
		t.Fatalf("cut closed %d connections, want 2", n)
	}
	for _, c := range clients {
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("a read after the cut = %v, want EOF", err)
		}
	}
}
