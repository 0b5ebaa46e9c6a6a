package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/acemq-go/acemq/transport"
)

// channel implements transport.Channel. Its methods are safe for
// concurrent use. A broker error closes it, as AMQP does.
type channel struct {
	c    *conn
	life lifecycle

	mu        sync.Mutex // leaf lock: never held while taking a queue's
	prefetch  int
	consumers map[string]*consumer
	unacked   unackedList
	// unseen holds, while the channel ends, what its consumers had taken
	// and not handed out yet (consumer.giveBack): the broker had sent it,
	// so it goes back as the unacked deliveries do, behind them, as
	// RabbitMQ returns a channel's deliveries in the order they were
	// sent. returned is set once end has put it back.
	unseen   []unacked
	returned bool
}

// Product is the product name the in-process broker gives for
// itself (transport.Server). It keeps no delivery limit.
const Product = "AceMQ memory"

// Server names the in-process broker (transport.ServerReporter).
func (ch *channel) Server() transport.Server { return transport.Server{Product: Product} }

var _ transport.Channel = (*channel)(nil)

// Done is closed once the channel has ended and its unacked messages are
// back in their queues.
func (ch *channel) Done() <-chan struct{} { return ch.life.done }

// Err says why the channel ended: a *transport.Error when the broker
// closed it, nil after Close or before it ended.
func (ch *channel) Err() error { return ch.life.reason() }

// Close ends the channel: consumers are cancelled and unacked messages are
// requeued with Redelivered set. Closing twice is harmless.
func (ch *channel) Close() error {
	ch.end(nil)
	return nil
}

// end tears the channel down with err as the reason.
func (ch *channel) end(err error) {
	if !ch.life.begin(err) {
		return
	}
	ch.mu.Lock()
	cs := make([]*consumer, 0, len(ch.consumers))
	for _, c := range ch.consumers {
		cs = append(cs, c)
	}
	ch.consumers = nil
	ch.mu.Unlock()
	// The consumers' queues dispatch nothing until this channel's unacked
	// deliveries are back at their heads, so the next consumer (the next
	// active one on a single-active-consumer queue) gets them first, in
	// the order they were delivered, as RabbitMQ does. The consumers stop
	// first, keeping what they had taken and not handed out yet (unseen);
	// the unacked deliveries go back, then those, which came after them.
	held := holdQueues(cs)
	var unused []*queue
	for _, c := range cs {
		if c.detach() {
			unused = append(unused, c.q)
		}
	}
	ch.mu.Lock()
	pending := ch.unacked.drain()
	unseen := ch.unseen
	ch.unseen, ch.returned = nil, true
	ch.mu.Unlock()
	// A lost channel counts, and what the consumers held counts too: the
	// broker had sent it (RabbitMQ returns it redelivered and counted).
	requeueAll(append(pending, unseen...), true)
	unholdQueues(held)
	for _, q := range unused {
		ch.c.b.deleteIfUnused(q)
	}
	ch.c.forget(ch)
	ch.life.finish()
}

// requeueAll returns unacked deliveries to their queues in the order they
// were delivered (putBackLocked), marked redelivered, each counted as a
// failed delivery when counted says so (returnLocked).
func requeueAll(us []unacked, counted bool) {
	for i := 0; i < len(us); {
		q := us[i].q
		j := i
		for j < len(us) && us[j].q == q {
			j++
		}
		q.mu.Lock()
		for k := i; k < j; k++ {
			if us[k].c != nil {
				us[k].c.inflight--
			}
			q.unacked--
			q.returnLocked(us[k].e, counted)
		}
		q.dispatchLocked()
		dead := q.takeDeadLocked()
		q.mu.Unlock()
		q.b.deadLetter(dead)
		if q.b.watched() {
			for k := i; k < j; k++ {
				m := us[k].e.m
				q.b.emit(Event{Kind: EventSettled, Queue: q.name, Exchange: m.exchange, RoutingKey: m.routingKey, Properties: m.props, Body: m.body, Reason: "returned"})
			}
		}
		i = j
	}
}

// keepUnseen keeps es, entries c had taken and not handed out yet, for
// the channel's end to return behind its unacked deliveries. It
// reports false when the channel is not ending or its end has already
// put back what it kept; the caller then restores them itself.
func (ch *channel) keepUnseen(c *consumer, es []entry) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.life.ended() || ch.returned {
		return false
	}
	for _, e := range es {
		ch.unseen = append(ch.unseen, unacked{e: e, q: c.q, c: c})
	}
	return true
}

// fail closes the channel (or, for a connection error, the connection)
// with e and returns e.
func (ch *channel) fail(e *transport.Error) error {
	if e.Connection {
		ch.c.end(e)
	} else {
		ch.end(e)
	}
	return e
}

func (ch *channel) check(ctx context.Context) error {
	if ch.life.ended() {
		return closedErr(ch.life.reason())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return ch.c.waitUnstalled(ctx)
}

// track records a delivery as unacked and returns its tag; ok is false
// when the channel has ended.
func (ch *channel) track(u unacked) (uint64, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.life.ended() {
		return 0, false
	}
	return ch.unacked.add(u), true
}

// trackBatch records a consumer's batch as unacked under consecutive tags
// and returns the first; ok is false when the channel has ended.
func (ch *channel) trackBatch(c *consumer, batch []entry) (first uint64, ok bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.life.ended() {
		return 0, false
	}
	for i := range batch {
		tag := ch.unacked.add(unacked{e: batch[i], q: c.q, c: c})
		if i == 0 {
			first = tag
		}
	}
	return first, true
}

func (ch *channel) untrack(tag uint64) (unacked, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.unacked.take(tag)
}

// DeclareExchange declares (or passively checks) an exchange.
func (ch *channel) DeclareExchange(ctx context.Context, spec transport.ExchangeSpec) error {
	if err := ch.check(ctx); err != nil {
		return err
	}
	if e := ch.c.b.declareExchange(spec); e != nil {
		return ch.fail(e)
	}
	return nil
}

// DeleteExchange deletes an exchange and its bindings; deleting a missing
// exchange succeeds, as in RabbitMQ 3.x and later.
func (ch *channel) DeleteExchange(ctx context.Context, name string) error {
	if err := ch.check(ctx); err != nil {
		return err
	}
	if e := ch.c.b.deleteExchange(name); e != nil {
		return ch.fail(e)
	}
	return nil
}

// DeclareQueue declares (or passively checks) a queue and reports its
// ready messages and consumers.
func (ch *channel) DeclareQueue(ctx context.Context, spec transport.QueueSpec) (transport.QueueInfo, error) {
	if err := ch.check(ctx); err != nil {
		return transport.QueueInfo{}, err
	}
	info, e := ch.c.b.declareQueue(spec, ch.c)
	if e != nil {
		return transport.QueueInfo{}, ch.fail(e)
	}
	return info, nil
}

// DeleteQueue deletes a queue, returning how many ready messages it held;
// its consumers' delivery channels close. A missing queue counts 0.
func (ch *channel) DeleteQueue(ctx context.Context, name string) (int, error) {
	if err := ch.check(ctx); err != nil {
		return 0, err
	}
	n, e := ch.c.b.deleteQueue(name, ch.c)
	if e != nil {
		return 0, ch.fail(e)
	}
	return n, nil
}

// PurgeQueue drops a queue's ready messages (not unacked ones) and
// returns how many.
func (ch *channel) PurgeQueue(ctx context.Context, name string) (int, error) {
	if err := ch.check(ctx); err != nil {
		return 0, err
	}
	q, e := ch.c.b.usableQueue(name, ch.c)
	if e != nil {
		return 0, ch.fail(e)
	}
	return q.purge(), nil
}

// BindQueue binds a queue to an exchange; binding twice is harmless.
func (ch *channel) BindQueue(ctx context.Context, spec transport.BindingSpec) error {
	if err := ch.check(ctx); err != nil {
		return err
	}
	if e := ch.c.b.bind(spec, ch.c, true); e != nil {
		return ch.fail(e)
	}
	return nil
}

// UnbindQueue removes a binding; removing a missing binding succeeds.
func (ch *channel) UnbindQueue(ctx context.Context, spec transport.BindingSpec) error {
	if err := ch.check(ctx); err != nil {
		return err
	}
	if e := ch.c.b.bind(spec, ch.c, false); e != nil {
		return ch.fail(e)
	}
	return nil
}

// Qos sets the prefetch of consumers started on this channel afterwards;
// 0 means unlimited. A negative value is refused.
func (ch *channel) Qos(prefetch int) error {
	if prefetch < 0 || prefetch > 65535 {
		return fmt.Errorf("memory: prefetch %d is outside 0..65535", prefetch)
	}
	if ch.life.ended() {
		return closedErr(ch.life.reason())
	}
	ch.mu.Lock()
	ch.prefetch = prefetch
	ch.mu.Unlock()
	return nil
}

// Consume subscribes to a queue. A missing queue is 404, another
// connection's exclusive queue 405, and an exclusive consume on a queue
// with consumers (or any consume beside an exclusive one) 403; each closes
// the channel.
func (ch *channel) Consume(ctx context.Context, spec transport.ConsumeSpec) (<-chan transport.Delivery, error) {
	c, err := ch.subscribe(ctx, spec, false)
	if err != nil {
		return nil, err
	}
	return c.out, nil
}

var _ transport.DirectConsumer = (*channel)(nil)

// ConsumeDirect subscribes like Consume, without a pump goroutine: next,
// called on the subscriber's goroutine, takes the queue's pushed
// deliveries a batch at a time and hands them out one by one, so a
// delivery crosses no goroutine inside the broker. next reports false once
// the subscription is cancelled (or its queue deleted) or the channel has
// ended; deliveries taken and not yet handed out go back to the queue head
// unmarked, as with Consume.
func (ch *channel) ConsumeDirect(ctx context.Context, spec transport.ConsumeSpec) (func() (transport.Delivery, bool), error) {
	c, err := ch.subscribe(ctx, spec, true)
	if err != nil {
		return nil, err
	}
	return c.next, nil
}

// subscribe is Consume and ConsumeDirect: direct makes a consumer without
// a pump, read through its next.
func (ch *channel) subscribe(ctx context.Context, spec transport.ConsumeSpec, direct bool) (*consumer, error) {
	if err := ch.check(ctx); err != nil {
		return nil, err
	}
	q, e := ch.c.b.usableQueue(spec.Queue, ch.c)
	if e != nil {
		return nil, ch.fail(e)
	}
	if q.stream != nil && ch.currentPrefetch() == 0 {
		return nil, ch.fail(errStreamPrefetch(q.name))
	}
	tag := spec.Tag
	if tag == "" {
		tag = genName("amq.ctag-")
	}
	ch.mu.Lock()
	if ch.life.ended() {
		ch.mu.Unlock()
		return nil, closedErr(ch.life.reason())
	}
	if _, dup := ch.consumers[tag]; dup {
		ch.mu.Unlock()
		return nil, ch.fail(&transport.Error{Code: 530, Reason: fmt.Sprintf("NOT_ALLOWED - attempt to reuse consumer tag '%s'", tag), Server: true, Connection: true})
	}
	c := newConsumer(tag, q, ch, ch.prefetch, spec.Exclusive, direct)
	c.sharedHeaders = spec.ReadOnlyHeaders
	if ch.consumers == nil {
		ch.consumers = map[string]*consumer{}
	}
	ch.consumers[tag] = c
	ch.mu.Unlock()

	if !direct {
		go c.pump()
	}
	q.mu.Lock()
	ended := ch.life.ended() // an end that began before this add missed it
	switch {
	case ended:
	case q.deleted:
		e = errNoQueue(q.name)
	case len(q.consumers) > 0 && (spec.Exclusive || q.consumers[0].exclusive):
		e = errExclusiveUse(q.name)
	case q.stream != nil && !c.seek(spec.Args):
		e = errStreamOffset(q.name)
	default:
		q.consumers = append(q.consumers, c)
		q.hadConsumer = true
		q.dispatchLocked()
	}
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.b.deadLetter(dead)
	if e != nil || ended {
		ch.mu.Lock()
		delete(ch.consumers, tag)
		ch.mu.Unlock()
		c.halt()
		if ended {
			return nil, closedErr(ch.life.reason())
		}
		return nil, ch.fail(e)
	}
	return c, nil
}

// Cancel stops a subscription: no new deliveries, the delivery channel
// closes, and messages already delivered stay unacked until settled or the
// channel ends. Cancelling an unknown tag does nothing.
func (ch *channel) Cancel(ctx context.Context, tag string) error {
	if err := ch.check(ctx); err != nil {
		return err
	}
	ch.mu.Lock()
	c := ch.consumers[tag]
	delete(ch.consumers, tag)
	ch.mu.Unlock()
	if c != nil && c.detach() {
		ch.c.b.deleteIfUnused(c.q)
	}
	return nil
}

// Get pulls one message (basic.get with manual ack); ok is false when the
// queue has none ready. MessageCount is what is left ready.
func (ch *channel) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	if err := ch.check(ctx); err != nil {
		return transport.Delivery{}, false, err
	}
	q, e := ch.c.b.usableQueue(queue, ch.c)
	if e != nil {
		return transport.Delivery{}, false, ch.fail(e)
	}
	if q.stream != nil {
		return transport.Delivery{}, false, ch.fail(errStreamGet(q.name))
	}
	ent, left, ok := q.get()
	if !ok {
		return transport.Delivery{}, false, nil
	}
	tag, tracked := ch.track(unacked{e: ent, q: q})
	if !tracked {
		q.mu.Lock()
		q.unacked--
		ent.deliveries-- // never handed out
		q.restoreAllLocked([]entry{ent})
		q.dispatchLocked()
		q.mu.Unlock()
		return transport.Delivery{}, false, closedErr(ch.life.reason())
	}
	d := ent.delivery(q.quorum, false)
	d.DeliveryTag = tag
	d.MessageCount = left
	return d, true, nil
}

// Ack acknowledges one delivery. An unknown tag closes the channel with
// 406 PRECONDITION_FAILED, as RabbitMQ does.
func (ch *channel) Ack(tag uint64) error { return ch.settle(tag, true, false, false) }

// Nack negatively acknowledges one delivery: requeued at the head with
// Redelivered, or dead-lettered (dropped without a DLX). As on RabbitMQ
// 4.3, a requeue by nack is not counted toward a quorum queue's
// x-delivery-count and delivery limit.
func (ch *channel) Nack(tag uint64, requeue bool) error {
	return ch.settle(tag, false, requeue, false)
}

// ReleaseAll returns every unacked delivery on the channel to the head of
// its queue, in delivery order, marked redelivered (transport.Releaser):
// one basic.nack with multiple set, which, as on RabbitMQ 4.3, is not
// counted toward a quorum queue's x-delivery-count and delivery limit.
func (ch *channel) ReleaseAll() error {
	if ch.c.maybeStalled.Load() && ch.c.deferIfStalled(func() { _ = ch.ReleaseAll() }) {
		return nil
	}
	ch.mu.Lock()
	if ch.life.ended() {
		ch.mu.Unlock()
		return closedErr(ch.life.reason())
	}
	pending := ch.unacked.drain()
	ch.mu.Unlock()
	requeueAll(pending, false)
	return nil
}

// Reject is Nack for a single message, except that a requeue by reject is
// counted toward a quorum queue's x-delivery-count and delivery limit.
func (ch *channel) Reject(tag uint64, requeue bool) error {
	return ch.settle(tag, false, requeue, true)
}

func (ch *channel) settle(tag uint64, ack, requeue, counted bool) error {
	if ch.c.maybeStalled.Load() && ch.c.deferIfStalled(func() { _ = ch.settle(tag, ack, requeue, counted) }) {
		return nil
	}
	ch.mu.Lock()
	if ch.life.ended() {
		ch.mu.Unlock()
		return closedErr(ch.life.reason())
	}
	u, ok := ch.unacked.take(tag)
	ch.mu.Unlock()
	if !ok {
		return ch.fail(errUnknownTag(tag))
	}
	if !ack && u.q.stream != nil {
		u.q.settle(u, true, false, false) // the credit returns as the connection ends
		return ch.fail(errStreamNack(u.q.name))
	}
	u.q.settle(u, ack, requeue, counted)
	if b := ch.c.b; b.watched() {
		reason := "ack"
		switch {
		case !ack && requeue:
			reason = "requeue"
		case !ack:
			reason = "reject"
		}
		b.emit(Event{Kind: EventSettled, Queue: u.q.name, Exchange: u.e.m.exchange, RoutingKey: u.e.m.routingKey, Properties: u.e.m.props, Body: u.e.m.body, Reason: reason})
	}
	return nil
}
