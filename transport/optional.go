package transport

import (
	"context"
	"time"
)

// The optional interfaces below let a driver, a connection or a channel
// say what only it knows, so the engine never branches on a scheme.

// URLChecker is implemented by drivers whose URLs carry engine settings or
// can be wrong in ways only the driver knows. Connect calls CheckURL before
// any dial, so a bad URL fails at once with the driver's words.
type URLChecker interface {
	CheckURL(rawURL string) (URLSettings, error)
}

// URLSettings are engine settings a URL asks for.
type URLSettings struct {
	// ConfirmsOff turns publisher confirms off for application publishes,
	// as acemq.Config.NoPublisherConfirms does (memory://name?confirms=off).
	ConfirmsOff bool
}

// Prober is implemented by drivers that can tell cheaply, without a
// handshake, whether a broker at cfg's addresses accepts connections now
// (for RabbitMQ: whether a TCP connect succeeds). A recovery whose dial was
// refused probes between attempts, so it starts the next one as soon as a
// restarted broker listens instead of up to an interval later.
type Prober interface {
	Probe(ctx context.Context, cfg Config) bool
}

// BoundedCloser is implemented by connections whose close handshake can be
// bounded: CloseWithin waits at most d for the broker's answer and then
// drops the socket. Every channel has ended when it returns. The engine
// uses it for a connection it is giving up, which a broker that blocked it
// (or a partition) would never answer.
type BoundedCloser interface {
	CloseWithin(d time.Duration) error
}

// CloseWithin closes conn, within d when it is a BoundedCloser.
func CloseWithin(conn Connection, d time.Duration) error {
	if b, ok := conn.(BoundedCloser); ok {
		return b.CloseWithin(d)
	}
	return conn.Close()
}

// Holder is implemented by connections that can gather the bytes of
// several writes into one socket write. A publishing goroutine calls Hold
// before a run of publishes and Release after it, before it waits for
// anything: while any writer holds the connection, everything written on
// it (publishes, acks, heartbeats, other channels) is kept in the process;
// the last writer to Release writes it all in one call, synchronously, on
// its own goroutine. A bounded amount is kept (a driver's cap); more is
// written through at once. Bytes are therefore never left behind a writer
// that has gone on to wait: they are on the socket, or in the hands of a
// writer still inside its run.
//
// deadline, when not zero, is the latest time the holder's bytes may go
// out: a write of kept bytes that finds it passed (the process was frozen
// in between) writes nothing and closes the connection instead, so its
// publishes end as lost, never as sent late. A deadline belongs to its
// holder: Release is given the same deadline, and once its holder has
// released, it judges no later write.
//
// Release reports a failed write of the kept bytes; the connection is then
// closed, and every publish whose bytes were kept ends as lost (its
// confirm callback says so), never as confirmed. ctx bounds Release's
// write as it bounds Publisher.Publish's: when ctx ends before the socket
// is free, Release returns ctx's error and the kept bytes go out with the
// next write on the connection; when it ends during a write the broker is
// not reading, the write is abandoned and the connection closed. Hold
// never waits. Hold and Release are safe for concurrent use; every Hold
// must be matched by one Release.
type Holder interface {
	Hold(deadline time.Time)
	Release(ctx context.Context, deadline time.Time) error
}

// Server is what a broker says about itself when a connection opens
// (AMQP's connection.start server-properties).
type Server struct {
	// Product is the broker's name: "RabbitMQ", or "AceMQ memory" for the
	// in-process broker.
	Product string
	// Version is the broker's version as it gives it ("4.0.5"); "" when it
	// gives none.
	Version string
}

// ServerReporter is implemented by channels that know which broker they
// are open to. A caller whose behaviour depends on the broker's version
// (how a returned message is counted, say) asks the channel it uses; a
// channel that does not implement it leaves the broker unknown.
type ServerReporter interface {
	Server() Server
}

// Releaser is implemented by channels that can hand every delivery they
// hold unsettled back to its queue at once, in the order they were
// delivered, and without counting a failed delivery where the broker tells
// the two apart (RabbitMQ: one basic.nack with requeue, multiple set and
// delivery tag 0; RabbitMQ 4.3 and later count such a return toward
// neither x-delivery-count nor a delivery limit, while a reject or a
// closed channel counts). A caller that reads messages to give them back
// cancels its subscriptions first, so nothing is delivered again to it.
type Releaser interface {
	ReleaseAll() error
}
