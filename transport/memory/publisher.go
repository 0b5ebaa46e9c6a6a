package memory

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/acemq-go/acemq/transport"
)

// pendingConfirm is an answer waiting to be handed to its ConfirmFunc.
type pendingConfirm struct {
	done transport.ConfirmFunc
	conf transport.Confirmation
}

// heldPublish is a publish written while the broker was blocked: not yet
// routed, not yet confirmed.
type heldPublish struct {
	m         *message
	done      transport.ConfirmFunc
	mandatory bool
}

// publisher implements transport.Publisher. Publish is safe for concurrent
// use; publishes are routed and confirmed in the order they were written.
type publisher struct {
	c       *conn
	life    lifecycle
	confirm bool

	mu       sync.Mutex // serialises publishes, as one channel's frames are
	held     []heldPublish
	withheld []pendingConfirm
	scratch  []*queue
	slab     slab

	// The confirmer goroutine calls ConfirmFuncs without any broker lock.
	cmu    sync.Mutex
	cq     []pendingConfirm
	wake   chan struct{}
	stop   chan struct{}
	exited chan struct{}
	// calling is set while the confirmer runs ConfirmFuncs.
	calling atomic.Bool
}

var _ transport.Publisher = (*publisher)(nil)

func newPublisher(c *conn, confirm bool) *publisher {
	p := &publisher{c: c, life: newLifecycle(), confirm: confirm,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	if confirm {
		go p.confirmer()
	} else {
		close(p.exited)
	}
	return p
}

// Confirming reports whether the channel is in confirm mode.
func (p *publisher) Confirming() bool { return p.confirm }

// Done is closed when the channel has ended; by then every pending confirm
// has been decided (answers are still delivered asynchronously).
func (p *publisher) Done() <-chan struct{} { return p.life.done }

// Close ends the channel; pending confirms are answered Lost. It waits for
// the answers already decided to be delivered, except when called while a
// ConfirmFunc is running (say, from one), where waiting would deadlock.
func (p *publisher) Close() error {
	p.end(transport.ErrClosed)
	if !p.calling.Load() {
		<-p.exited
	}
	return nil
}

// Publish routes msg, copying its body and headers first. On a confirming
// publisher done is called exactly once: Acked; Nacked (a full
// reject-publish queue or an injected nack); Returned with 312 NO_ROUTE for
// an unroutable mandatory message; or Lost when the channel ends first.
// Publishing to a missing exchange closes the channel with 404; that
// publish and every pending one end Lost, and the 404 is returned.
// A body over the broker's max_message_size closes the channel with 406,
// as on RabbitMQ. A content header frame over the connection's frame_max
// is refused before anything is done, with a *transport.LimitError.
// Publishing on an ended channel returns an error wrapping ErrNotWritten;
// a header value AMQP 0-9-1 cannot carry, one wrapping ErrNotWritten and
// ErrUnencodable; a short string over 255 bytes (the exchange, the routing
// key, the content type, message id or reply-to), one wrapping those and
// ErrShortString.
// While the broker is blocked the publish is accepted but held, neither
// routed nor confirmed, until Unblock; the first such publish on a
// connection calls its OnBlocked(true, reason) before Publish returns.
func (p *publisher) Publish(ctx context.Context, msg *transport.Message, done transport.ConfirmFunc) error {
	if !p.confirm && done != nil {
		return fmt.Errorf("memory: done must be nil on a non-confirming publisher: %w", transport.ErrNotWritten)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", transport.ErrNotWritten, err)
	}
	// RabbitMQ's client refuses what AMQP 0-9-1 cannot carry before
	// writing; so does the in-process broker (in the pass that takes the
	// table over, which also measures it).
	if err := transport.CheckShortStrings(msg); err != nil {
		return fmt.Errorf("memory: cannot encode the message: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
	}
	headers, tsize, err := takeHeaders(msg)
	if err != nil {
		return fmt.Errorf("memory: cannot encode the message headers: %w: %w: %w", transport.ErrNotWritten, transport.ErrUnencodable, err)
	}
	// Over frame_max: refused before writing, as the RabbitMQ transport
	// refuses it.
	if err := p.checkFrameMax(msg, tsize); err != nil {
		return err
	}
	if len(msg.Body) > p.c.limits.brokerMax {
		return p.tooLarge(len(msg.Body), done)
	}
	p.mu.Lock()
	m := newMessage(msg, headers, &p.slab)
	if p.life.ended() {
		p.mu.Unlock()
		return fmt.Errorf("%w: %w", transport.ErrNotWritten, closedErr(p.life.reason()))
	}
	if p.c.b.dropAt.Load() > 0 && p.c.b.takeDrop() {
		p.dropAt(m, done, msg.Mandatory)
		return nil
	}
	if p.c.b.blocked.Load() || len(p.held) > 0 {
		p.held = append(p.held, heldPublish{m: m, done: done, mandatory: msg.Mandatory})
		p.mu.Unlock()
		p.c.heldPublish(p)
		return nil
	}
	e := p.routeLocked(m, done, msg.Mandatory, false)
	p.mu.Unlock()
	if e != nil {
		p.end(e)
		return e
	}
	if p.c.b.flow.Load() && p.c.b.flow.CompareAndSwap(true, false) {
		runtime.Gosched() // let consumers catch up, as RabbitMQ's flow control would
	}
	return nil
}

// dropAt carries out an armed connection loss on m's publish (see
// Broker.DropConnectionsAtPublish); p.mu is held and released here. The
// publish is kept unanswered (routed first when the drop says so), then
// every connection ends, which answers it Lost.
func (p *publisher) dropAt(m *message, done transport.ConfirmFunc, mandatory bool) {
	b := p.c.b
	if b.dropRouted.Load() {
		if e := p.routeLocked(m, done, mandatory, true); e != nil {
			p.mu.Unlock()
			p.end(e)
			return
		}
	} else {
		p.held = append(p.held, heldPublish{m: m, done: done, mandatory: mandatory})
	}
	p.mu.Unlock()
	b.DropConnections()
}

// checkFrameMax refuses a publish whose content header frame would be over
// the connection's frame_max; tsize is its headers table's encoded size.
func (p *publisher) checkFrameMax(msg *transport.Message, tsize int) error {
	props := msg.Properties
	props.Headers = nil
	n := transport.ContentHeaderFrameSize(&props)
	if len(msg.Headers) > 0 {
		n += tsize
	}
	if max := p.c.limits.frameMax; n > max {
		return fmt.Errorf("memory: publish refused before writing: %w", &transport.LimitError{Limit: transport.LimitFrameMax, Size: n, Max: max})
	}
	return nil
}

// tooLarge is the broker's answer to a body over its max_message_size,
// RabbitMQ's: the publishing channel closes with 406 PRECONDITION_FAILED
// (the message and every pending one end Lost with it).
func (p *publisher) tooLarge(size int, done transport.ConfirmFunc) error {
	e := chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "message size %d is larger than configured max size %d", size, p.c.limits.brokerMax)
	p.mu.Lock()
	if p.life.ended() {
		p.mu.Unlock()
		return fmt.Errorf("%w: %w", transport.ErrNotWritten, closedErr(p.life.reason()))
	}
	if done != nil {
		p.enqueue(pendingConfirm{done, transport.Confirmation{Outcome: transport.Lost, Err: e}})
	}
	p.mu.Unlock()
	p.end(e)
	return e
}

// routeLocked routes one message and records its answer; p.mu is held.
// keep withholds the answer as StopConfirming would.
func (p *publisher) routeLocked(m *message, done transport.ConfirmFunc, mandatory, keep bool) *transport.Error {
	b := p.c.b
	var conf transport.Confirmation
	var seq uint64
	if b.watched() {
		seq = b.watch.seq.Add(1)
		b.emit(Event{Kind: EventPublished, Seq: seq, Exchange: m.exchange, RoutingKey: m.routingKey, Properties: m.props, Body: m.body})
	}
	if p.confirm && b.takeNack() {
		conf.Outcome = transport.Nacked
		if seq != 0 {
			b.emit(Event{Kind: EventRouted, Seq: seq, Exchange: m.exchange, RoutingKey: m.routingKey, Nacked: true})
		}
	} else {
		res, scratch, e := b.publish(m, p.scratch)
		p.scratch = scratch
		if seq != 0 {
			b.emit(Event{Kind: EventRouted, Seq: seq, Exchange: m.exchange, RoutingKey: m.routingKey, Queues: res.queues, Nacked: res.rejected})
		}
		switch {
		case e != nil:
			if done != nil {
				p.enqueue(pendingConfirm{done, transport.Confirmation{Outcome: transport.Lost, Err: e}})
			}
			return e
		case res.rejected:
			conf.Outcome = transport.Nacked
		case !res.routed && mandatory:
			conf = transport.Confirmation{Outcome: transport.Returned, ReplyCode: transport.CodeNoRoute, ReplyText: "NO_ROUTE"}
		default:
			conf.Outcome = transport.Acked
		}
	}
	if !p.confirm || done == nil {
		return nil
	}
	if keep || b.withhold.Load() || len(p.withheld) > 0 {
		p.withheld = append(p.withheld, pendingConfirm{done, conf})
		return nil
	}
	p.enqueue(pendingConfirm{done, conf})
	return nil
}

// enqueue hands an answer to the confirmer goroutine, keeping order.
func (p *publisher) enqueue(pc pendingConfirm) {
	p.cmu.Lock()
	first := len(p.cq) == 0
	p.cq = append(p.cq, pc)
	p.cmu.Unlock()
	if first {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// confirmer calls ConfirmFuncs in order, in batches, until stopped and
// drained.
func (p *publisher) confirmer() {
	defer close(p.exited)
	var batch []pendingConfirm
	for {
		stopping := false
		select {
		case <-p.wake:
		case <-p.stop:
			stopping = true
		}
		for {
			p.cmu.Lock()
			batch, p.cq = p.cq, batch[:0]
			p.cmu.Unlock()
			if len(batch) == 0 {
				break
			}
			p.calling.Store(true)
			for i := range batch {
				batch[i].done(batch[i].conf)
				batch[i] = pendingConfirm{}
			}
			p.calling.Store(false)
		}
		if stopping {
			return
		}
	}
}

func (p *publisher) stopConfirmer() {
	if p.confirm {
		close(p.stop)
	}
}

// flushHeld routes publishes held while the broker was blocked.
func (p *publisher) flushHeld() {
	p.mu.Lock()
	var failed *transport.Error
	for len(p.held) > 0 && !p.c.b.blocked.Load() {
		h := p.held[0]
		p.held[0] = heldPublish{}
		p.held = p.held[1:]
		if failed != nil {
			if h.done != nil {
				p.enqueue(pendingConfirm{h.done, transport.Confirmation{Outcome: transport.Lost, Err: failed}})
			}
			continue
		}
		failed = p.routeLocked(h.m, h.done, h.mandatory, false)
	}
	p.mu.Unlock()
	if failed != nil {
		p.end(failed)
	}
}

// releaseWithheld delivers confirms withheld by StopConfirming.
func (p *publisher) releaseWithheld() {
	p.mu.Lock()
	for _, pc := range p.withheld {
		p.enqueue(pc)
	}
	p.withheld = nil
	p.mu.Unlock()
}

// end closes the channel: everything not yet answered is answered Lost
// with cause, after the answers already decided.
func (p *publisher) end(cause error) {
	if !p.life.begin(cause) {
		return
	}
	if cause == nil {
		cause = transport.ErrClosed
	}
	p.mu.Lock()
	lost := transport.Confirmation{Outcome: transport.Lost, Err: cause}
	for _, h := range p.held {
		if h.done != nil {
			p.enqueue(pendingConfirm{h.done, lost})
		}
	}
	for _, pc := range p.withheld {
		p.enqueue(pendingConfirm{pc.done, lost})
	}
	p.held, p.withheld = nil, nil
	p.mu.Unlock()
	p.stopConfirmer()
	p.c.forget(p)
	p.life.finish()
}
