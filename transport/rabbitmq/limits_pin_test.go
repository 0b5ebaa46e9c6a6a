package rabbitmq

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/wire"
)

// amqp091-go's documentation does not promise how deep or how large a
// headers table it reads; the frame guard (guard.go) and the engine's
// outbound refusal (header_limits.go) hold headers to wire.MaxDepth and
// wire.MaxEntries because the consuming side reads through amqp091-go.
// TestAmqp091ReadsHeaderTablesExactlyUpToAceMQsLimits pins that through
// amqp091-go's public API alone (amqp.Open on a socket whose other end is
// a scripted broker): a delivery at each limit is read, one past it is
// refused, and wire.CheckHeaders says the same of each. An amqp091-go
// release that reads more or less fails here.
func TestAmqp091ReadsHeaderTablesExactlyUpToAceMQsLimits(t *testing.T) {
	nest := func(depth int, inner func(any) any) map[string]any {
		var v any = "leaf"
		for i := 0; i < depth; i++ {
			v = inner(v)
		}
		return map[string]any{"x-nested": v}
	}
	table := func(v any) any { return map[string]any{"a": v} }
	array := func(v any) any { return []any{v} }
	wide := func(n int) map[string]any {
		h := make(map[string]any, n)
		for i := 0; i < n; i++ {
			h[fmt.Sprintf("k%05d", i)] = int32(i)
		}
		return h
	}
	cases := []struct {
		name     string
		headers  map[string]any
		readable bool
	}{
		{"tables at the depth limit", nest(wire.MaxDepth, table), true},
		{"tables one past the depth limit", nest(wire.MaxDepth+1, table), false},
		{"arrays at the depth limit", nest(wire.MaxDepth, array), true},
		{"arrays one past the depth limit", nest(wire.MaxDepth+1, array), false},
		{"headers at the entry limit", wide(wire.MaxEntries), true},
		{"headers one past the entry limit", wide(wire.MaxEntries + 1), false},
		{"a nested table one past the entry limit", map[string]any{"x-wide": wide(wire.MaxEntries + 1)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, over := wire.CheckHeaders(c.headers, nil)
			if over == c.readable {
				t.Fatalf("wire.CheckHeaders says over=%v; want %v", over, !c.readable)
			}
			if got := amqp091Reads(t, c.headers); got != c.readable {
				t.Fatalf("amqp091-go %s read this delivery (want readable=%v): its table read limits are no longer wire.MaxDepth=%d and wire.MaxEntries=%d; change those, the guard and the docs with it",
					map[bool]string{true: "did", false: "did not"}[got], c.readable, wire.MaxDepth, wire.MaxEntries)
			}
		})
	}
}

// amqp091Reads opens an amqp091-go connection on a pipe, plays a broker
// delivering one message with headers to its consumer, and reports
// whether the client handed the delivery over (true) or closed the
// connection instead (false).
func amqp091Reads(t *testing.T, headers map[string]any) bool {
	t.Helper()
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	_ = server.SetDeadline(time.Now().Add(wait))
	b := &fakeBroker{t: t, conn: server, fr: newFrameReader(server, 1<<24)}
	script := make(chan error, 1)
	go func() {
		script <- func() error {
			hdr := make([]byte, 8)
			if _, err := io.ReadFull(server, hdr); err != nil {
				return err
			}
			b.send(start("PLAIN"))
			b.next() // start-ok
			b.send(method(0, 10, 30, u16(0), u32(1<<24), u16(0)))
			b.next() // tune-ok
			b.next() // open
			b.send(method(0, 10, 41, short("")))
			b.next() // channel.open
			b.send(method(1, 20, 11, longstr("")))
			b.next() // basic.consume
			b.send(method(1, 60, 21, short("ctag")))
			props, err := appendTable(nil, headers, 0)
			if err != nil {
				return err
			}
			// A client that refuses the frame closes the pipe part way
			// through this write: its error is the expected end.
			_, _ = server.Write(append(method(1, 60, 60, short("ctag"), u64(1), []byte{0}, short(""), short("q")),
				frame(2, 1, u16(60), u16(0), u64(0), u16(propHeaders), props)...))
			// Keep reading until the client closes its end.
			for {
				if _, err := b.fr.next(); err != nil {
					return nil
				}
			}
		}()
	}()
	conn, err := amqp.Open(client, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "u", Password: "p"}}, Vhost: "/"})
	if err != nil {
		t.Fatalf("amqp.Open against the scripted broker: %v", err)
	}
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("q", "ctag", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var read bool
	select {
	case d, ok := <-deliveries:
		read = ok && len(d.Headers) == len(headers)
	case e := <-closes:
		if e == nil {
			t.Fatal("the connection closed without a reason")
		}
	case <-time.After(wait):
		t.Fatal("neither a delivery nor a close")
	}
	_ = server.Close()
	_ = conn.Close()
	if err := <-script; err != nil && !errors.Is(err, io.EOF) {
		t.Logf("scripted broker: %v", err)
	}
	return read
}
