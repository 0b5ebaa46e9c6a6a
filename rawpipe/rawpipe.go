// Package rawpipe names the types of (*acemq.Conn).RawPipe: raw messages
// written in batches on one confirming channel, so that the broker routes
// them in the order written across batches, while the confirms of one
// batch are awaited as the next is written. The outbox relay publishes
// through it; code that relays stored messages in order can do the same.
//
// The package holds types only, so that package acemq can return them
// without the package growing a name for each; it is versioned with the
// root module (github.com/acemq-go/acemq).
package rawpipe

import "context"

// Message is one raw message: bytes, content type and headers published
// unchanged, mandatory, persistent, confirmed (acemq.RawMessage's
// defaults).
type Message struct {
	Exchange    string
	RoutingKey  string
	ContentType string
	MessageID   string
	Headers     map[string]any
	Body        []byte
}

// Batch is a written batch whose confirms may still be outstanding.
type Batch interface {
	// Failed reports whether a failure of one of the batch's messages is
	// already known (a nack, an unroutable return, a closed channel, a
	// message that could not be written). It never blocks.
	Failed() bool
	// Wait waits for the confirms of the written messages (bounded by
	// ctx and the Conn's confirm timeout) and returns one error per
	// message given to Write: nil only for a message the broker
	// confirmed and routed, otherwise a *acemq.PublishError (Sent false
	// for one never written). It may be called once.
	Wait(ctx context.Context) []error
}

// Pipe writes batches on one confirming channel, so the broker routes
// them in the order written, across batches. Write is not safe for
// concurrent use; one caller writes at a time.
type Pipe interface {
	// Write writes ms in order and returns once they are written (or
	// writing stopped), with their confirms outstanding. With after (a
	// batch this pipe wrote before, possibly nil) still waiting for
	// confirms, ms go on after's channel; writing stops (and nothing
	// more is written) once a failure of after or of ms is known, once
	// ctx is done or its deadline has passed (read from the clock before
	// every write), and at the first message that cannot be written or
	// is refused (a blocked broker, a recovery, a header over the
	// limits). Before the first write of a batch with nothing
	// outstanding before it, a block or a recovery is waited out within
	// ctx.
	Write(ctx context.Context, ms []Message, after Batch) Batch
}
