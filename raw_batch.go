package acemq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
)

// reasonBatchStopped is the error of a PublishRawBatch member that was
// never written because the batch stopped before it.
const reasonBatchStopped = "an earlier message of the batch failed, or the batch's deadline passed, before this one was written; nothing was sent"

// PublishRawBatch publishes ms in order as library hops (see PublishRaw:
// bytes, content type and headers unchanged, mandatory unless
// NotMandatory, persistent unless Transient, confirmed) on one confirming
// channel, so the broker routes them in the order given, with their
// confirms outstanding together. It returns one error per message: nil
// only for a message the broker confirmed (and, when mandatory, routed);
// otherwise a *PublishError as PublishRaw gives.
//
// It waits out a broker block or a recovery within ctx before the first
// write. A message with a header over the Go client's limits is refused as
// PublishRaw refuses it (ErrHeaderLimit). Writing stops at the first
// message that cannot be written or is refused, once
// a failure of an earlier message is known (a nack, an unroutable return,
// a closed channel), and once ctx is done or its deadline has passed (the
// deadline is read from the clock before every write, so a process that
// was frozen writes nothing more when it wakes); every message after that
// point gets an error with Sent false. A failure known only after later
// messages were written does not undo them: they may be confirmed, so a
// caller that needs order must treat the first failure as the end of the
// batch. Waiting for confirms is bounded by ctx and the confirm timeout.
// Safe for concurrent use.
func (c *Conn) PublishRawBatch(ctx context.Context, ms []RawMessage) []error {
	return c.pub.rawBatch(ctx, ms)
}

// rawBatch is PublishRawBatch: one batch written by a rawPipe of its own
// (raw_pipe.go), its confirms awaited at once.
func (p *publishing) rawBatch(ctx context.Context, ms []RawMessage) []error {
	msgs := make([]*transport.Message, len(ms))
	for i := range ms {
		msgs[i] = ms[i].message()
	}
	rp := rawPipe{p: p}
	return rp.write(ctx, msgs, nil).Wait(ctx)
}

func pastDeadline(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// rawBatch collects a PublishRawBatch's confirms.
type rawBatch struct {
	mu       sync.Mutex
	cfs      []transport.Confirmation
	answered []bool
	pending  int
	bad      bool // some answer is not an ack
	sealed   bool
	allDone  chan struct{}
}

func (b *rawBatch) add()   { b.mu.Lock(); b.pending++; b.mu.Unlock() }
func (b *rawBatch) unadd() { b.mu.Lock(); b.pending--; b.mu.Unlock() }

func (b *rawBatch) failed() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.bad }

func (b *rawBatch) confirmFunc(p *publishing, i int) transport.ConfirmFunc {
	return func(cf transport.Confirmation) {
		p.permits.release()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.cfs[i], b.answered[i] = cf, true
		if cf.Outcome != transport.Acked {
			b.bad = true
		}
		b.pending--
		if b.pending == 0 && b.sealed {
			close(b.allDone)
		}
	}
}

// wait waits for the confirms of the written messages and fills their
// errors in errs.
func (b *rawBatch) wait(p *publishing, ctx context.Context, written []*transport.Message, errs []error) []error {
	b.mu.Lock()
	b.sealed = true
	if b.pending == 0 {
		close(b.allDone)
	}
	b.mu.Unlock()
	t := time.NewTimer(p.cfg.confirmTimeout)
	defer t.Stop()
	var waitErr error
	timedOut := false
	select {
	case <-b.allDone: // answered already: report the answers even if ctx ended
	default:
		select {
		case <-b.allDone:
		case <-t.C:
			timedOut = true
		case <-ctx.Done():
			waitErr = ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, msg := range written {
		switch {
		case b.answered[i]:
			errs[i] = classify(msg, b.cfs[i])
		case timedOut:
			errs[i] = newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonNotConfirmed, p.cfg.confirmTimeout), true, nil)
		default:
			errs[i] = newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonStoppedWait, waitErr), true, waitErr)
		}
	}
	return errs
}

// message is m as the transport publishes it.
func (m RawMessage) message() *transport.Message {
	mode := uint8(2)
	if m.Transient {
		mode = 1
	}
	id := m.MessageID
	if len(id) > transport.MaxShortString && m.Headers[header.ID] == id {
		id = "" // the header carries it (messageIDProperty)
	}
	return &transport.Message{
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
		Mandatory:  !m.NotMandatory,
		Properties: transport.Properties{
			ContentType:   m.ContentType,
			MessageID:     id,
			CorrelationID: m.CorrelationID,
			ReplyTo:       m.ReplyTo,
			DeliveryMode:  mode,
			Priority:      m.Priority,
			Headers:       transport.Table(m.Headers),
		},
		Body: m.Body,
	}
}
