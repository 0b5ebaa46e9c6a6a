package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/transport"
)

// confirmBuffer is how many broker answers the client may queue for the
// dispatcher before its reader goroutine waits; generous so a burst of
// acks never stalls the socket.
const confirmBuffer = 4096

// publisher is one publishing channel. Publish is safe for concurrent use:
// wmu covers only sequence assignment, waiter registration and the frame
// write, never a wait for the broker. In confirm mode one dispatcher
// goroutine drains acks, nacks and returns and answers the waiters; it ends
// with the channel, answering everything still pending Lost.
type publisher struct {
	ch      *amqp.Channel
	confirm bool
	done    chan struct{}

	// wmu serialises writes; a publish waiting for it gives up when its
	// context ends. stopped is set once no further write may be attempted
	// on this channel.
	wmu     writeLock
	stopped bool

	// w is the connection's writer, whose watch bounds a publish call by
	// its context (watch.go); nil in tests that make a publisher alone.
	w *heldConn

	// closer is the goroutine that closes the channel after a write
	// failed part way; Close waits for it.
	closer sync.WaitGroup

	// pmu guards table and err.
	pmu   sync.Mutex
	table pending
	err   error

	// frameMax is the negotiated frame_max Publish checks before writing;
	// set by connection.Publisher before the publisher is handed out.
	frameMax int
}

func newPublisher(ch *amqp.Channel, confirm bool) *publisher {
	p := &publisher{ch: ch, confirm: confirm, done: make(chan struct{}), wmu: newWriteLock()}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	if !confirm {
		go p.watch(closes)
		return p
	}
	p.table = newPending()
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmBuffer))
	returns := ch.NotifyReturn(make(chan amqp.Return, 256))
	go p.dispatch(confirms, returns, closes)
	return p
}

// watch serves a non-confirming channel: it only notices the end.
func (p *publisher) watch(closes chan *amqp.Error) {
	e := <-closes
	p.finish(e)
}

// dispatch answers waiters in the order the broker spoke. RabbitMQ sends
// basic.return before the basic.ack of the same publish and the client
// pushes both from one reader goroutine in frame order, so every return
// already queued when an ack arrives is recorded before the ack resolves.
func (p *publisher) dispatch(confirms chan amqp.Confirmation, returns chan amqp.Return, closes chan *amqp.Error) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			p.onReturn(&r)
		case c, ok := <-confirms:
			if !ok {
				var e *amqp.Error
				select {
				case e = <-closes:
				default:
				}
				p.finish(e)
				return
			}
		drain:
			for returns != nil {
				select {
				case r, ok := <-returns:
					if !ok {
						returns = nil
						break drain
					}
					p.onReturn(&r)
				default:
					break drain
				}
			}
			p.onConfirm(c)
		}
	}
}

func (p *publisher) onReturn(r *amqp.Return) {
	p.pmu.Lock()
	p.table.markReturned(returnKey{r.MessageId, r.Exchange, r.RoutingKey}, r.ReplyCode, r.ReplyText)
	p.pmu.Unlock()
}

func (p *publisher) onConfirm(c amqp.Confirmation) {
	p.pmu.Lock()
	w, ok := p.table.remove(c.DeliveryTag)
	p.pmu.Unlock()
	if !ok || w.done == nil {
		return
	}
	switch {
	case !c.Ack:
		w.done(transport.Confirmation{Outcome: transport.Nacked})
	case w.returned:
		w.done(transport.Confirmation{Outcome: transport.Returned, ReplyCode: w.code, ReplyText: w.text})
	default:
		w.done(transport.Confirmation{Outcome: transport.Acked})
	}
}

// finish records why the channel ended, stops further writes, closes Done
// and answers every pending publish Lost with that cause.
func (p *publisher) finish(e *amqp.Error) {
	var cause error = transport.ErrClosed
	if e != nil {
		cause = fromAMQPError(e)
	}
	// Taking wmu waits out a write in progress, so its waiter is either
	// already registered (and answered below) or never will be.
	_ = p.wmu.lock(context.Background())
	p.stopped = true
	p.wmu.unlock()

	p.pmu.Lock()
	if e != nil {
		p.err = cause
	}
	lost := p.table.takeAll()
	p.pmu.Unlock()
	close(p.done)

	for _, w := range lost {
		if w.done != nil {
			w.done(transport.Confirmation{Outcome: transport.Lost, Err: cause})
		}
	}
}

// Publish writes msg. In confirm mode done is called exactly once, from the
// dispatcher goroutine, with Acked, Nacked, Returned (mandatory and
// unroutable) or Lost (the channel ended first). An error wrapping
// transport.ErrNotWritten means nothing was written and done will not be
// called (with transport.ErrUnencodable too when a header value has no AMQP
// field type, and with ErrShortString as well when a short string is over
// 255 bytes; a *transport.LimitError when the content header frame is over
// the negotiated frame_max: sending it again will not help); any other error means
// bytes may have gone, done will be called (Lost) and the channel is
// closed. On a non-confirming publisher done must be nil. Publish is safe for concurrent use and never waits for the broker.
func (p *publisher) Publish(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rabbitmq: publish not attempted: %w: %w", transport.ErrNotWritten, err)
	}
	if !p.confirm && done != nil {
		return fmt.Errorf("rabbitmq: a confirm callback was given to a non-confirming publisher: %w", transport.ErrNotWritten)
	}
	// RabbitMQ closes the whole connection on a frame over frame_max, so
	// the content header is measured before amqp091-go sends it (as
	// converted, below); the owned connection's writer measures the frame
	// it encoded (appendPublish).
	// amqp091-go finds a short string over 255 bytes only while it writes
	// the frames, after the method frame went: refused here first.
	if err := transport.CheckShortStrings(msg); err != nil {
		return fmt.Errorf("rabbitmq: cannot encode the message: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
	}
	headers := toAMQPTable(msg.Headers)
	if headers != nil {
		if err := headers.Validate(); err != nil {
			return fmt.Errorf("rabbitmq: cannot encode the message headers: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
		}
	}
	props := msg.Properties
	props.Headers = transport.Table(headers)
	if err := p.checkFrameMax(&props); err != nil {
		return err
	}
	pub := amqp.Publishing{
		Headers:       headers,
		ContentType:   msg.ContentType,
		MessageId:     msg.MessageID,
		CorrelationId: msg.CorrelationID,
		ReplyTo:       msg.ReplyTo,
		DeliveryMode:  msg.DeliveryMode,
		Priority:      msg.Priority,
		Body:          msg.Body,
	}

	if err := p.wmu.lock(ctx); err != nil {
		return fmt.Errorf("rabbitmq: publish not attempted: another publish held the channel past the caller's context: %w: %w", transport.ErrNotWritten, err)
	}
	if p.stopped {
		p.wmu.unlock()
		return p.notWritten()
	}
	var seq uint64
	if p.confirm {
		seq = p.ch.GetNextPublishSeqNo()
		p.pmu.Lock()
		p.table.add(seq, waiter{done: done, key: returnKey{msg.MessageID, msg.Exchange, msg.RoutingKey}, mandatory: msg.Mandatory})
		p.pmu.Unlock()
	}
	// amqp091-go writes on this goroutine, behind a lock of its own: the
	// call is what ctx bounds (a write the broker is not reading is
	// abandoned when ctx ends, and the connection with it).
	var watch uint64
	if p.w != nil {
		watch = p.w.watch.begin(ctx)
	}
	_, err := p.ch.PublishWithDeferredConfirm(msg.Exchange, msg.RoutingKey, msg.Mandatory, false, pub)
	var cut error
	if watch != 0 {
		cut = p.w.watch.end(watch)
	}
	if err == nil {
		p.wmu.unlock()
		return nil
	}
	if errors.Is(err, amqp.ErrClosed) {
		// The client refused before writing a byte.
		return p.unwrittenLocked(seq)
	}
	if cut != nil {
		err = cut
	}
	// Part of the frames may be on the wire. The client has given the
	// sequence number back, so nothing more may be written on this
	// channel: its waiter stays registered and is answered Lost when the
	// channel ends, which closing it makes sure of.
	p.stopped = true
	p.wmu.unlock()
	// Closed on a goroutine of the publisher's (the client's Close waits
	// for the broker, and Publish never does); Close waits for it.
	p.closer.Add(1)
	go func() {
		defer p.closer.Done()
		_ = p.ch.Close()
	}()
	if cut != nil {
		return fmt.Errorf("rabbitmq: publish failed during the write; the message may have been sent: %w", err)
	}
	return fmt.Errorf("rabbitmq: publish failed during the write; the message may have been sent: %w", convertError(err))
}

// checkFrameMax refuses, before anything is written, a publish whose
// content header frame would be over the negotiated frame_max.
func (p *publisher) checkFrameMax(props *transport.Properties) error {
	if p.frameMax <= 0 {
		return nil
	}
	if n := transport.ContentHeaderFrameSize(props); n > p.frameMax {
		return fmt.Errorf("rabbitmq: publish refused before writing: %w", &transport.LimitError{Limit: transport.LimitFrameMax, Size: n, Max: p.frameMax})
	}
	return nil
}

// unwrittenLocked ends a Publish whose write sent nothing: it takes back
// the waiter registered under seq, stops further writes on the channel
// and releases wmu, which the caller holds, and returns the not-written
// error.
func (p *publisher) unwrittenLocked(seq uint64) error {
	if p.confirm {
		p.pmu.Lock()
		p.table.remove(seq)
		p.pmu.Unlock()
	}
	p.stopped = true
	p.wmu.unlock()
	return p.notWritten()
}

func (p *publisher) notWritten() error {
	p.pmu.Lock()
	cause := p.err
	p.pmu.Unlock()
	if cause == nil {
		return fmt.Errorf("rabbitmq: publish on a closed channel: %w: %w", transport.ErrNotWritten, transport.ErrClosed)
	}
	return fmt.Errorf("rabbitmq: publish on a closed channel: %w: %w: %w", transport.ErrNotWritten, transport.ErrClosed, cause)
}

// Confirming reports whether the channel is in confirm mode.
func (p *publisher) Confirming() bool { return p.confirm }

// Done is closed when the channel has ended, for any reason.
func (p *publisher) Done() <-chan struct{} { return p.done }

// Close ends the channel and waits until every pending confirm has been
// answered Lost, and for the goroutine that closes the channel after a
// failed write, if one was started. Closing an ended channel returns nil.
func (p *publisher) Close() error {
	err := p.ch.Close()
	<-p.done
	p.closer.Wait()
	if err != nil && convertError(err) != transport.ErrClosed {
		return convertError(err)
	}
	return nil
}
