package rabbitmq

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// BenchmarkPublishConfirmedPipelined publishes 256-byte persistent messages
// on one confirm-mode channel with up to 1000 unanswered at a time.
func BenchmarkPublishConfirmedPipelined(b *testing.B) {
	c := dial(b, transport.Config{})
	q := tempQueue(b, c, "rabbit.bench", nil)
	p := openPublisher(b, c)
	window := make(chan struct{}, 1000)
	answered := make(chan struct{}, 1)
	var left = int64(b.N)
	var failures int64
	done := func(cf transport.Confirmation) {
		if cf.Outcome != transport.Acked {
			failures++
		}
		<-window
		left--
		if left == 0 {
			answered <- struct{}{}
		}
	}
	msg := &transport.Message{RoutingKey: q, Body: make([]byte, 256), Properties: transport.Properties{DeliveryMode: 2}}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		window <- struct{}{}
		if err := p.Publish(context.Background(), msg, done); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-answered:
	case <-time.After(time.Minute):
		b.Fatal("confirms did not all arrive")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
	if failures != 0 {
		b.Fatalf("%d publishes not acked", failures)
	}
}

// BenchmarkHeldWrite measures one publish-sized socket write through the
// writer (hold.go) on a loopback socket whose other end drains it, under a
// context that cannot end and under one with a deadline (watch.go): what
// the write deadlines cost a write that does not block.
func BenchmarkHeldWrite(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, s)
	}()
	sock, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	w := newHeldConn(sock)
	defer w.Close()
	frame := make([]byte, 330) // a 256-byte publish's frames
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"deadline", deadline}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := w.put(c.ctx, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
