package acemq

import (
	"context"
	"errors"

	"github.com/acemq-go/acemq/rawpipe"
	"github.com/acemq-go/acemq/transport"
)

// RawPipe returns a pipe that writes batches of raw messages on one
// confirming channel, so that the broker routes them in the order written,
// across batches, while earlier batches' confirms are still outstanding.
// Each message is published as PublishRawBatch publishes it (headers
// checked, mandatory, persistent, confirmed); see rawpipe.Pipe for when
// writing stops. The outbox relay publishes through it. A pipe is not safe
// for concurrent use: one goroutine writes at a time; a Conn may hand out
// any number of pipes.
func (c *Conn) RawPipe() rawpipe.Pipe { return &rawPipe{p: c.pub} }

// rawPipe writes batches of raw messages as PublishRawBatch does (library
// hops: headers checked, mandatory, persistent, confirmed; writing stops
// at the first known failure or past ctx's deadline), but returns once a
// batch is written, its confirms answered later, and keeps one publishing
// channel for as long as a batch it wrote waits for confirms: the next
// batch goes on that channel, so the broker routes the batches in the
// order written. A chain picks a channel afresh (round robin, with the
// repair writeConfirmed does) only when nothing it wrote is outstanding.
type rawPipe struct {
	p   *publishing
	pub transport.Publisher // the channel of the batches written last
}

// pipeBatch is one batch a rawPipe wrote.
type pipeBatch struct {
	p       *publishing
	b       *rawBatch
	msgs    []*transport.Message
	errs    []error
	written int
}

// Failed reports whether a failure of the batch is known already.
func (pb *pipeBatch) Failed() bool {
	return pb.b.failed() || pb.written < len(pb.msgs)
}

// Wait waits for the written messages' confirms and returns the errors.
func (pb *pipeBatch) Wait(ctx context.Context) []error {
	return pb.b.wait(pb.p, ctx, pb.msgs[:pb.written], pb.errs)
}

// outstanding reports whether some written message waits for its confirm.
func (pb *pipeBatch) outstanding() bool {
	pb.b.mu.Lock()
	defer pb.b.mu.Unlock()
	return pb.b.pending > 0
}

// Write writes ms; see rawpipe.Pipe.
func (rp *rawPipe) Write(ctx context.Context, ms []rawpipe.Message, after rawpipe.Batch) rawpipe.Batch {
	msgs := make([]*transport.Message, len(ms))
	for i, m := range ms {
		msgs[i] = RawMessage{Exchange: m.Exchange, RoutingKey: m.RoutingKey, ContentType: m.ContentType, MessageID: m.MessageID, Headers: m.Headers, Body: m.Body}.message()
	}
	prev, _ := after.(*pipeBatch)
	return rp.write(ctx, msgs, prev)
}

// write writes msgs behind prev (nil: behind nothing, on a channel picked
// afresh). It returns once they are written, or writing stopped.
func (rp *rawPipe) write(ctx context.Context, msgs []*transport.Message, prev *pipeBatch) *pipeBatch {
	pb := &pipeBatch{p: rp.p, msgs: msgs, errs: make([]error, len(msgs)),
		b: &rawBatch{cfs: make([]transport.Confirmation, len(msgs)), answered: make([]bool, len(msgs)), allDone: make(chan struct{})}}
	if len(msgs) == 0 {
		return pb
	}
	chained := prev != nil && prev.outstanding()
	stopAt := func(i int, err error) *pipeBatch {
		pb.errs[i] = err
		for j := i + 1; j < len(msgs); j++ {
			pb.errs[j] = newPubErr(msgs[j], OutcomeRefused, reasonBatchStopped, false, nil)
		}
		return pb
	}
	p := rp.p
	// The batch's writes are held (batch.go) and leave in one socket write
	// when Write returns, before its caller waits for anything; bytes kept
	// past ctx's deadline are dropped.
	hd := holding{ctx: ctx}
	hd.deadline, _ = ctx.Deadline()
	defer hd.release()
	if !chained {
		rp.pub = nil
		if err := p.awaitPublishable(ctx, msgs[0], true); err != nil {
			return stopAt(0, err)
		}
	}
	for i, msg := range msgs {
		if pb.b.failed() || (prev != nil && prev.Failed()) || pastDeadline(ctx) {
			return stopAt(i, newPubErr(msg, OutcomeRefused, reasonBatchStopped, false, ctx.Err()))
		}
		if err := headerRefusal(msg); err != nil {
			return stopAt(i, err)
		}
		if err := p.bodyRefusal(msg); err != nil {
			return stopAt(i, err)
		}
		if err := p.acquireHeld(ctx, msg, &hd); err != nil {
			return stopAt(i, err)
		}
		if err := p.refusal(msg); err != nil {
			p.permits.release()
			return stopAt(i, err)
		}
		pb.b.add()
		var err error
		if rp.pub == nil {
			rp.pub, err = p.writeHeld(ctx, msg, pb.b.confirmFunc(p, i), &hd)
		} else {
			if hd.last == nil {
				hd.on(p.pubs.Load()) // the pinned channel's connection: the current set's, or a lost one's (then it refuses)
			}
			hd.resume()
			err = rp.pub.Publish(ctx, msg, pb.b.confirmFunc(p, i))
		}
		if err != nil && errors.Is(err, transport.ErrNotWritten) {
			p.permits.release()
			pb.b.unadd()
			if uerr := unencodable(msg, err); uerr != nil {
				err = uerr
			} else if rerr := p.refusal(msg); rerr != nil {
				err = rerr
			} else {
				err = newPubErr(msg, OutcomeFailed, "its publishing channel closed before it was written; nothing was sent", false, err)
			}
			return stopAt(i, err)
		}
		pb.written = i + 1
	}
	return pb
}
