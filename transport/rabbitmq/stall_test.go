package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/acemq-go/acemq/devcerts"
	"github.com/acemq-go/acemq/internal/stallbroker"
	"github.com/acemq-go/acemq/security"
	"github.com/acemq-go/acemq/transport"
)

// A broker that stops reading (internal/stallbroker stops at the first
// publish it sees, with a small receive buffer): the client's write of a
// large message blocks once the socket buffers are full, as against a
// broker whose process was stopped.

// stallSlack is how far past its bound a call may return on a loaded
// two-core machine: scheduling, not a wait. Without the bounds these
// calls return only when the connection is dropped for silence, or never.
const stallSlack = 1500 * time.Millisecond

var bothFrameWriters = []string{"native", "amqp091"}

func stalledDial(t *testing.T, frames string) (*stallbroker.Broker, transport.Connection) {
	t.Helper()
	b := stallbroker.Start(t)
	return b, dial(t, transport.Config{URL: b.URL() + "?frames=" + frames})
}

// stalledPublishers opens n publishers on c and makes the test's end
// close c (bounded) before it closes them: a publisher's Close waits for
// the channel's write, which only the connection's close ends.
func stalledPublishers(t *testing.T, c transport.Connection, n int) []transport.Publisher {
	t.Helper()
	var ps []transport.Publisher
	for range n {
		ps = append(ps, openPublisher(t, c))
	}
	t.Cleanup(func() { _ = transport.CloseWithin(c, 100*time.Millisecond) })
	return ps
}

func bigMessage() *transport.Message {
	return &transport.Message{RoutingKey: "q", Body: make([]byte, 8<<20)}
}

func waitStalled(t *testing.T, b *stallbroker.Broker) {
	t.Helper()
	select {
	case <-b.Stalled():
	case <-time.After(wait):
		t.Fatal("the broker never saw the publish")
	}
}

// A publish whose write blocks returns when its context ends, saying the
// message may have been sent (part of it is on the wire); the connection
// is closed, since the stream is no longer framed, and the publish is
// answered Lost.
func TestAWriteTheBrokerIsNotReadingIsAbandonedWhenItsContextEnds(t *testing.T) {
	for _, frames := range bothFrameWriters {
		t.Run(frames, func(t *testing.T) {
			b, c := stalledDial(t, frames)
			p := stalledPublishers(t, c, 1)[0]
			answered := make(chan transport.Confirmation, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- p.Publish(ctx, bigMessage(), func(cf transport.Confirmation) { answered <- cf }) }()
			waitStalled(t, b) // the write is under way, and blocks
			cancel()
			ended := time.Now()
			var err error
			select {
			case err = <-errc:
			case <-time.After(stallSlack):
				t.Fatalf("the publish had not returned %s after its context ended", stallSlack)
			}
			t.Logf("returned %s after its context ended", time.Since(ended).Round(time.Millisecond))
			if err == nil || errors.Is(err, transport.ErrNotWritten) {
				t.Fatalf("Publish = %v; want a write that may have been sent", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Publish = %v; want it to wrap the context's error", err)
			}
			select {
			case cf := <-answered:
				if cf.Outcome != transport.Lost {
					t.Fatalf("the abandoned publish was answered %v; want Lost", cf.Outcome)
				}
			case <-time.After(wait):
				t.Fatal("the abandoned publish was never answered")
			}
			select {
			case <-c.Done():
			case <-time.After(wait):
				t.Fatal("the connection stayed up after a write was abandoned mid-frame")
			}
		})
	}
}

// A publish waiting for the socket while another write is blocked gives
// up when its own context ends. On the owned connection it has written
// nothing and the connection goes on; amqp091-go writes behind a lock of
// its own, so there the wait is ended by abandoning the blocked write.
func TestAPublishWaitingBehindABlockedWriteEndsWithItsContext(t *testing.T) {
	for _, frames := range bothFrameWriters {
		t.Run(frames, func(t *testing.T) {
			b, c := stalledDial(t, frames)
			ps := stalledPublishers(t, c, 2)
			blocked, waiting := ps[0], ps[1]
			go func() { _ = blocked.Publish(context.Background(), bigMessage(), func(transport.Confirmation) {}) }()
			waitStalled(t, b)
			const deadline = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			begun := time.Now()
			// As large: amqp091-go lets another channel's frames between
			// the blocked publish's, so a small one could still fit.
			err := waiting.Publish(ctx, bigMessage(), func(transport.Confirmation) {})
			if took := time.Since(begun); took > deadline+stallSlack {
				t.Fatalf("the waiting publish returned after %s; its context ended at %s", took.Round(time.Millisecond), deadline)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Publish = %v; want it to wrap the context's error", err)
			}
			if frames == "native" {
				if !errors.Is(err, transport.ErrNotWritten) {
					t.Fatalf("Publish = %v; want nothing written", err)
				}
				select {
				case <-c.Done():
					t.Fatal("a publish that wrote nothing ended the connection")
				default:
				}
			}
		})
	}
}

// CloseWithin returns within its bound while a write with no deadline of
// its own is blocked holding the socket: the socket's write deadline is
// set before the close waits for anything, and the blocked write ends.
func TestCloseWithinHoldsWhileAWriteIsBlocked(t *testing.T) {
	for _, frames := range bothFrameWriters {
		t.Run(frames, func(t *testing.T) {
			b, c := stalledDial(t, frames)
			p := stalledPublishers(t, c, 1)[0]
			errc := make(chan error, 1)
			go func() { errc <- p.Publish(context.Background(), bigMessage(), func(transport.Confirmation) {}) }()
			waitStalled(t, b)
			const bound = 300 * time.Millisecond
			begun := time.Now()
			_ = transport.CloseWithin(c, bound)
			if took := time.Since(begun); took > bound+stallSlack {
				t.Fatalf("CloseWithin(%s) returned after %s with a write blocked", bound, took.Round(time.Millisecond))
			}
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("the blocked publish returned nil after the close")
				}
			case <-time.After(stallSlack):
				t.Fatal("the blocked publish had not returned after the close")
			}
		})
	}
}

// The same over TLS (amqps://): the write deadline reaches the socket
// under tls.Conn, and a TLS write that timed out fails every later write
// (the close_notify alert included) at once.
func TestCloseWithinHoldsWhileATLSWriteIsBlocked(t *testing.T) {
	set, err := devcerts.Generate(devcerts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(set.Broker.CertPEM, set.Broker.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(set.CA.Cert)
	for _, frames := range bothFrameWriters {
		t.Run(frames, func(t *testing.T) {
			b := stallbroker.StartTLS(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
			_, port, _ := net.SplitHostPort(b.Addr())
			c := dial(t, transport.Config{URL: "amqps://guest:guest@localhost:" + port + "/?frames=" + frames,
				TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, Security: &security.Settings{AllowDevelopmentCertificates: true}})
			p := stalledPublishers(t, c, 1)[0]
			errc := make(chan error, 1)
			go func() { errc <- p.Publish(context.Background(), bigMessage(), func(transport.Confirmation) {}) }()
			waitStalled(t, b)
			const bound = 300 * time.Millisecond
			begun := time.Now()
			_ = transport.CloseWithin(c, bound)
			if took := time.Since(begun); took > bound+stallSlack {
				t.Fatalf("CloseWithin(%s) returned after %s with a TLS write blocked", bound, took.Round(time.Millisecond))
			}
			select {
			case <-errc:
			case <-time.After(stallSlack):
				t.Fatal("the blocked publish had not returned after the close")
			}
		})
	}
}
