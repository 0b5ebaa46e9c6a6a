package rabbitmq

import (
	"context"
	"errors"
	"io"
	"net"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// A socket that breaks while confirmed publishes are in flight fails those
// publishes: each one either returns an error from Publish or is answered
// Lost (none is left unanswered, none is answered Acked after the break
// without the broker), and publishing after the break returns an error.
func TestBrokenSocketFailsThePublishesItConcerns(t *testing.T) {
	px, c, q := dialThroughBreakableProxy(t, "coalesce-break")
	p := openPublisher(t, c)

	var mu sync.Mutex
	answers := map[transport.Outcome]int{}
	var answered sync.WaitGroup
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256)}
	ctx := context.Background()
	written, acked := 0, atomic.Int32{}
	afterMute := 0
	var pubErr error
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		// Break the socket with publishes in flight: from 200 confirms on,
		// the broker's answers are dropped, so the next 20 publishes can
		// only end Lost (on a loaded machine each publish may otherwise be
		// confirmed before the next), then the socket breaks.
		if acked.Load() >= 200 && px.mute() {
			afterMute++
			if afterMute > 20 {
				px.kill()
			}
		}
		answered.Add(1)
		err := p.Publish(ctx, msg, func(cf transport.Confirmation) {
			mu.Lock()
			answers[cf.Outcome]++
			mu.Unlock()
			if cf.Outcome == transport.Acked {
				acked.Add(1)
			}
			answered.Done()
		})
		if err != nil {
			pubErr = err
			if errors.Is(err, transport.ErrNotWritten) {
				answered.Done() // nothing written: done is not called
			} else {
				written++ // bytes may have gone: done is called, Lost
			}
			break
		}
		written++
	}
	if pubErr == nil {
		t.Fatalf("publishing went on for %v after the socket broke without an error", wait)
	}
	done := make(chan struct{})
	go func() { answered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("some of %d written publishes were never answered: %v", written, answers)
	}
	mu.Lock()
	defer mu.Unlock()
	if answers[transport.Acked]+answers[transport.Lost] != written || answers[transport.Lost] == 0 {
		t.Fatalf("%d written publishes answered %v; want each Acked or Lost, some Lost", written, answers)
	}
}

// dialThroughBreakableProxy makes a temporary queue named after name (on a
// direct connection) and returns a proxy to the test broker with a
// connection dialled through it.
func dialThroughBreakableProxy(t *testing.T, name string) (*breakableProxy, transport.Connection, string) {
	t.Helper()
	url := testenv.AMQPURL(t)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	px := startBreakableProxy(t, u.Host)
	via := *u
	via.Host = px.ln.Addr().String()
	direct := dial(t, transport.Config{URL: url})
	q := tempQueue(t, direct, name, nil)
	return px, dial(t, transport.Config{URL: via.String()}), q
}

// breakableProxy forwards TCP connections to target until killed.
type breakableProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
	once  sync.Once
	muted atomic.Bool // the broker's bytes are dropped, not forwarded
}

// mute drops everything the broker sends from now on; it reports true.
func (p *breakableProxy) mute() bool { p.muted.Store(true); return true }

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

func startBreakableProxy(t *testing.T, target string) *breakableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &breakableProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
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
	}()
	t.Cleanup(p.kill)
	return p
}

// kill closes the listener and every forwarded connection, once.
func (p *breakableProxy) kill() {
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
