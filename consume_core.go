package acemq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// delivery is one message received by a consumer, tied to the channel it
// came on: it can only be settled there.
//
// Its size is watched: with the consumer's Message[T] for a []byte payload
// it fits one 576-byte allocation (see consumerCore.newDelivery).
type delivery struct {
	d        transport.Delivery
	att      *attachment
	received int64 // Unix nanoseconds
	settled  atomic.Bool
	end      processEnd
	// msg is the consumer's *Message[T], allocated with the delivery (see
	// consumerCore.newDelivery); nil when the consumer made none.
	msg any
}

// receivedAt is when the delivery was received.
func (dv *delivery) receivedAt() time.Time { return time.Unix(0, dv.received) }

// attachment is one subscription on one channel. Recovery makes a new one.
type attachment struct {
	ch     transport.Channel
	ctx    context.Context // cancelled when the channel ends or at hard stop
	cancel context.CancelFunc

	held      atomic.Int64 // deliveries from this channel not yet released
	retired   atomic.Bool  // a newer attachment replaced this one
	closeOnce sync.Once
}

// retire marks a replaced attachment: its channel (kept open only so its
// held deliveries can still be settled) closes once the last is released.
func (a *attachment) retire() {
	a.retired.Store(true)
	if a.held.Load() == 0 {
		a.closeOnce.Do(func() { _ = a.ch.Close() })
	}
}

func (a *attachment) alive() bool {
	select {
	case <-a.ch.Done():
		return false
	default:
		return true
	}
}

// consumerHost is everything a consumer needs from its Conn, and all it
// may reach of it. The Conn implements it; a test may give a fake.
type consumerHost interface {
	// channel opens a channel on the consuming connection.
	channel(ctx context.Context) (transport.Channel, error)
	// hop publishes a library hop (a retry, a put-back, a set-aside copy):
	// mandatory, confirmed, waiting out a block or a recovery within ctx.
	hop(ctx context.Context, msg *transport.Message) error
	// connection numbers the current broker connection and reports
	// whether the Conn is open on it.
	connection() (gen uint64, open bool)
	// settled reports a delivery's settlement (counters, settlement hooks).
	settled(s Settlement)
	// fellBack reports a hop that could not be made (telemetry, hooks).
	fellBack(f Fallback)
	// deadLettering reports whether queue was declared with broker
	// dead-lettering (the set-aside's last resort).
	deadLettering(queue string) bool
	// left tells the Conn the consumer's drain began: recovery no longer
	// re-attaches it and Close no longer drains it.
	left(k *consumerCore)
}

// consumerEnv is the Conn's configuration a consumer needs, copied in at
// creation.
type consumerEnv struct {
	logger                        *slog.Logger
	tel                           *telemetry
	recoveryInterval, recoveryMax time.Duration
}

type consumerCore struct {
	host         consumerHost
	env          consumerEnv
	queue, tag   string
	prefetch     int
	concurrency  int
	policy       RetryPolicy
	args         transport.Table
	argsAt       func() transport.Table // when set, replaces args on every attach
	stream       bool                   // hand-backs and rejects become acks (see ConsumerConfig.OnStream)
	waitsInQueue bool                   // retries go back to the queue, which holds the wait (retry_in_queue.go)
	singleActive bool                   // the drain hands back by closing the channel (see ConsumerConfig.SingleActive)
	asideFailed  func(Fallback)         // told of a message that could not be set aside (ConsumerConfig.OnSetAsideFailed)
	drainTimeout time.Duration
	process      func(dv *delivery)
	// newDelivery allocates a delivery, with room for the typed message
	// the handler gets in the same allocation (Consume sets it); nil
	// allocates a bare one.
	newDelivery func() *delivery

	base     context.Context
	hardStop context.CancelFunc
	work     chan *delivery
	// lanes (ConsumerConfig.KeyOrder only) are one hand-off per worker: a
	// delivery with a key goes to lanes[fnv(key) % concurrency], so one
	// worker runs a key's deliveries in arrival order. Each holds up to
	// prefetch, like work, so the reader's send never blocks.
	lanes    []chan *delivery
	orderKey func(in Inbound) string
	workers  sync.WaitGroup
	readers  sync.WaitGroup
	inFlight atomic.Int64

	attachMu sync.Mutex // serialises attaches (recovery, re-subscriber)

	mu       sync.Mutex
	att      *attachment
	draining bool
	// drainingNow is draining for readers that take no lock (a worker
	// about to start a delivery); set with draining, under mu.
	drainingNow atomic.Bool
	drainCh     chan struct{}
	// cancelled is set once the drain's basic.cancel is done; until then
	// the deliveries it returns unrun wait in unrun (handBackUnrun).
	cancelled bool
	unrun     []*delivery
	stalled   error
	resub     bool
	stallGen  uint64 // the connection generation the stall was seen on
	closed    chan struct{}
	stranded  int // what the first drain left unsettled
	drainOnce sync.Once
	bg        sync.WaitGroup // later hops and the re-subscriber; see goBackground
	bgDone    bool           // the drain waited for bg; no more may start

	// outstanding counts the deliveries received and not yet released.
	// held lists them for releaseAll, with released ones dropped lazily
	// (when it is full), so a worker releasing a delivery takes no lock
	// the reader takes per delivery. omu guards held and zeroCh.
	outstanding atomic.Int64
	omu         sync.Mutex
	held        []*delivery
	zeroCh      chan struct{}
}

func newConsumerCore(host consumerHost, env consumerEnv, queue, tag string, prefetch, concurrency int, policy RetryPolicy, args transport.Table, drainTimeout time.Duration, orderKey func(Inbound) string) *consumerCore {
	base, hardStop := context.WithCancel(context.Background())
	k := &consumerCore{
		host: host, env: env, queue: queue, tag: tag, prefetch: prefetch, concurrency: concurrency,
		policy: policy, args: args, drainTimeout: drainTimeout,
		base: base, hardStop: hardStop,
		work:    make(chan *delivery, prefetch),
		drainCh: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	if orderKey != nil {
		k.orderKey = orderKey
		k.lanes = make([]chan *delivery, concurrency)
		for i := range k.lanes {
			k.lanes[i] = make(chan *delivery, prefetch)
		}
	}
	for i := 0; i < concurrency; i++ {
		k.workers.Add(1)
		if k.lanes != nil {
			go k.laneWorker(k.lanes[i])
		} else {
			go k.worker()
		}
	}
	return k
}

// handOff returns the channel dv goes to: its key's lane, or work.
func (k *consumerCore) handOff(dv *delivery) chan *delivery {
	if k.lanes == nil {
		return k.work
	}
	key := k.keyOf(&dv.d)
	if key == "" {
		return k.work
	}
	h := uint32(2166136261) // FNV-1a, 32 bit
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return k.lanes[h%uint32(len(k.lanes))]
}

// keyOf calls the key function. One that panics is logged and its
// delivery treated as unordered ("" key): the reader must not die.
func (k *consumerCore) keyOf(d *transport.Delivery) (key string) {
	defer func() {
		if r := recover(); r != nil {
			k.env.logger.Error("acemq: the ConsumerConfig.KeyOrder key function panicked; the delivery runs unordered", "queue", k.queue, "id", idtext.Short(d.MessageID), "panic", r)
			key = ""
		}
	}()
	return k.orderKey(Inbound{
		Queue: k.queue, Exchange: d.Exchange, RoutingKey: d.RoutingKey,
		ContentType: d.ContentType, Body: d.Body, Redelivered: d.Redelivered,
		Envelope: readEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.ReplyTo),
	})
}

// closeWork closes every hand-off channel; the readers have stopped.
func (k *consumerCore) closeWork() {
	close(k.work)
	for _, l := range k.lanes {
		close(l)
	}
}

// takeQueued returns one delivery waiting in any hand-off channel.
func (k *consumerCore) takeQueued() (*delivery, bool) {
	select {
	case dv := <-k.work:
		return dv, true
	default:
	}
	for _, l := range k.lanes {
		select {
		case dv := <-l:
			return dv, true
		default:
		}
	}
	return nil, false
}

// goBackground starts fn on a goroutine the consumer owns: the drain
// waits for it. It reports false, starting nothing, once the drain has
// finished waiting.
func (k *consumerCore) goBackground(fn func()) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bgDone {
		return false
	}
	k.bg.Add(1)
	go func() {
		defer k.bg.Done()
		fn()
	}()
	return true
}

// waitBackground stops new background goroutines and waits for the ones
// running. The caller has ended base, so none waits long.
func (k *consumerCore) waitBackground() {
	k.mu.Lock()
	k.bgDone = true
	k.mu.Unlock()
	k.bg.Wait()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (k *consumerCore) stopWorkers() {
	k.hardStop()
	k.closeWork()
	k.workers.Wait()
}

// checkQueue verifies the source queue exists, on a throwaway channel.
func (k *consumerCore) checkQueue(ctx context.Context) error {
	ch, err := k.host.channel(ctx)
	if err != nil {
		return fmt.Errorf("acemq: cannot start consumer on %q: %w", k.queue, err)
	}
	defer ch.Close()
	if _, err := ch.DeclareQueue(ctx, transport.QueueSpec{Name: k.queue, Passive: true}); err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return fmt.Errorf("acemq: cannot start consumer on %q: the queue does not exist; declare it first (Conn.Apply with a Topology), consumers never declare their source queue: %w", k.queue, err)
		}
		return fmt.Errorf("acemq: cannot start consumer on %q: %w", k.queue, err)
	}
	return nil
}

// attach opens a channel, sets the per-consumer prefetch and subscribes
// with the consumer's stable tag. Attaches are serialised per consumer.
func (k *consumerCore) attach(ctx context.Context) error {
	k.attachMu.Lock()
	defer k.attachMu.Unlock()
	return k.attachLocked(ctx)
}

// attachOn attaches only while the Conn is open on connection generation
// gen: a re-subscriber never races the recovery of a newer connection. It
// reports whether it attached.
func (k *consumerCore) attachOn(ctx context.Context, gen uint64) (bool, error) {
	k.attachMu.Lock()
	defer k.attachMu.Unlock()
	if g, open := k.host.connection(); !open || g != gen {
		return false, nil
	}
	return true, k.attachLocked(ctx)
}

func (k *consumerCore) attachLocked(ctx context.Context) error {
	if k.isDraining() {
		return nil
	}
	ch, err := k.openChannel(ctx)
	if err != nil {
		return err
	}
	return k.subscribeLocked(ctx, ch)
}

// openChannel opens a channel with the consumer's prefetch set, ready for
// attachChannel. Recovery opens them while it re-declares.
func (k *consumerCore) openChannel(ctx context.Context) (transport.Channel, error) {
	ch, err := k.host.channel(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(k.prefetch); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return ch, nil
}

// attachChannel subscribes on ch, a channel from openChannel, under the
// consumer's attach lock. It takes ch over: a channel it does not attach
// on (an error, or a drain meanwhile) it closes.
func (k *consumerCore) attachChannel(ctx context.Context, ch transport.Channel) error {
	k.attachMu.Lock()
	defer k.attachMu.Unlock()
	if k.isDraining() {
		_ = ch.Close()
		return nil
	}
	return k.subscribeLocked(ctx, ch)
}

// subscribeLocked subscribes on ch (prefetch already set) and makes it the
// consumer's attachment. It closes ch when it fails.
func (k *consumerCore) subscribeLocked(ctx context.Context, ch transport.Channel) error {
	var err error
	// The engine only reads a delivery's headers (envelope, delivery
	// count, trace context, the unreadable mark).
	spec := transport.ConsumeSpec{Queue: k.queue, Tag: k.tag, Args: k.args, ReadOnlyHeaders: true}
	if k.argsAt != nil {
		spec.Args = k.argsAt()
	}
	var next func() (transport.Delivery, bool)
	if dc, ok := ch.(transport.DirectConsumer); ok {
		next, err = dc.ConsumeDirect(ctx, spec)
	} else {
		var deliveries <-chan transport.Delivery
		deliveries, err = ch.Consume(ctx, spec)
		next = func() (transport.Delivery, bool) {
			d, ok := <-deliveries
			return d, ok
		}
	}
	if err != nil {
		_ = ch.Close()
		return err
	}
	actx, cancel := context.WithCancel(k.base)
	att := &attachment{ch: ch, ctx: actx, cancel: cancel}
	k.mu.Lock()
	if k.draining {
		// A drain started meanwhile and released the channel it knew of;
		// this one would never be released.
		k.mu.Unlock()
		cancel()
		_ = ch.Close()
		return nil
	}
	old := k.att
	k.att = att
	k.stalled = nil
	k.readers.Add(1)
	k.mu.Unlock()
	go k.read(att, next)
	if old != nil {
		old.retire()
	}
	return nil
}

func (k *consumerCore) hold(dv *delivery) {
	dv.att.held.Add(1)
	k.outstanding.Add(1)
	k.omu.Lock()
	if len(k.held) == cap(k.held) && len(k.held) > 0 {
		// Full: drop the released ones; grow when most are still held,
		// so dropping costs O(1) per delivery.
		n := 0
		for _, h := range k.held {
			if !h.settled.Load() {
				k.held[n] = h
				n++
			}
		}
		clear(k.held[n:])
		k.held = k.held[:n]
		if n > cap(k.held)/2 {
			k.held = append(make([]*delivery, 0, 2*cap(k.held)), k.held...)
		}
	}
	k.held = append(k.held, dv)
	k.omu.Unlock()
}

// release marks dv as no longer held by this process (settled, or its
// channel is gone). It is idempotent per delivery.
func (k *consumerCore) release(dv *delivery) {
	if !dv.settled.CompareAndSwap(false, true) {
		return
	}
	if !dv.att.alive() {
		k.env.tel.deliveryLostOnDrop(k.queue)
	}
	if dv.att.held.Add(-1) == 0 && dv.att.retired.Load() {
		dv.att.closeOnce.Do(func() { _ = dv.att.ch.Close() })
	}
	k.inFlight.Add(-1)
	k.env.tel.inFlight(k.queue, -1)
	if k.outstanding.Add(-1) == 0 {
		k.omu.Lock()
		if k.outstanding.Load() == 0 && k.zeroCh != nil {
			close(k.zeroCh)
			k.zeroCh = nil
		}
		k.omu.Unlock()
	}
}

func (k *consumerCore) idle() <-chan struct{} {
	k.omu.Lock()
	defer k.omu.Unlock()
	if k.outstanding.Load() == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if k.zeroCh == nil {
		k.zeroCh = make(chan struct{})
	}
	return k.zeroCh
}

func (k *consumerCore) unsettled() int {
	return int(k.outstanding.Load())
}

func (k *consumerCore) isDraining() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.draining
}

// read forwards one attachment's deliveries to the workers. While draining
// it sends every delivery straight back, unrun.
func (k *consumerCore) read(att *attachment, next func() (transport.Delivery, bool)) {
	defer k.readers.Done()
	// The watcher ends the attachment's context when its channel ends. It
	// is one of the readers the drain waits for; the drain's hard stop
	// (which ends base, and with it the attachment's context) ends it too.
	k.readers.Add(1)
	go func() {
		defer k.readers.Done()
		select {
		case <-att.ch.Done():
		case <-k.base.Done():
		}
		att.cancel()
	}()
	for d, ok := next(); ok; d, ok = next() {
		var dv *delivery
		if k.newDelivery != nil {
			dv = k.newDelivery()
		} else {
			dv = new(delivery)
		}
		dv.d, dv.att, dv.received, dv.end = d, att, time.Now().UnixNano(), noopProcessEnd
		k.hold(dv)
		k.inFlight.Add(1)
		k.env.tel.inFlight(k.queue, 1)
		to := k.handOff(dv) // outside k.mu: it may call the key function
		// The draining check and a hand-off that finds room happen under
		// k.mu, so a drain that starts meanwhile finds the delivery in a
		// hand-off channel and sends it back unrun. A full one is waited on
		// outside k.mu, because a worker takes k.mu to start a delivery:
		// blocking under it deadlocked the consumer. It fills up when the
		// broker sends past the prefetch (a stream delivers whole chunks)
		// or, after a recovery, while deliveries of the lost channel still
		// wait in it. A drain closes drainCh, so the wait gives way and the
		// delivery goes back unrun; one that lands as the drain starts is
		// sent back unrun by the worker that takes it.
		k.mu.Lock()
		if k.draining {
			k.mu.Unlock()
			k.handBackUnrun(dv)
			continue
		}
		select {
		case to <- dv:
			k.mu.Unlock()
			continue
		default:
		}
		k.mu.Unlock()
		select {
		case to <- dv:
		case <-k.drainCh:
			k.handBackUnrun(dv)
		}
	}
	// The subscription ended: drain, channel loss (recovery re-attaches),
	// or a broker-side cancel (queue deleted), which we retry.
	if k.isDraining() || !att.alive() {
		return
	}
	k.markStalled(errors.New("the broker cancelled the subscription"))
}

func (k *consumerCore) worker() {
	defer k.workers.Done()
	for dv := range k.work {
		k.run(dv)
	}
}

// laneWorker runs its own lane's deliveries in order, and unordered ones
// from work when it is free, until both are closed.
func (k *consumerCore) laneWorker(lane chan *delivery) {
	defer k.workers.Done()
	work := k.work
	for lane != nil || work != nil {
		select {
		case dv, ok := <-lane:
			if !ok {
				lane = nil
				continue
			}
			k.run(dv)
		case dv, ok := <-work:
			if !ok {
				work = nil
				continue
			}
			k.run(dv)
		}
	}
}

func (k *consumerCore) run(dv *delivery) {
	if !dv.att.alive() {
		k.release(dv)
		return
	}
	if k.drainingNow.Load() {
		k.handBackUnrun(dv) // prefetched, never started: back unrun
		return
	}
	k.process(dv)
}

// markStalled records that the consumer stopped reading, and makes sure
// something re-attaches it. Re-attaching has one owner per connection:
// after a connection loss it is the Conn's recovery (reconnect attaches
// every consumer, and re-marks a stall it cannot mend on the new
// connection); while the connection stays up it is the re-subscriber
// started here, which acts only on the connection the stall was seen on.
// A broker that cancels a consumer just before it closes the connection
// (RabbitMQ on stop_app and many forced closes) thus leaves the job to the
// recovery, and the re-subscriber ends without a word.
func (k *consumerCore) markStalled(cause error) {
	gen, _ := k.host.connection()
	k.mu.Lock()
	k.stalled = cause
	k.stallGen = gen
	if k.resub || k.draining || errors.Is(cause, ErrClosed) {
		k.mu.Unlock()
		return
	}
	k.resub = true
	k.mu.Unlock()
	if !k.goBackground(k.resubscribe) {
		k.mu.Lock()
		k.resub = false
		k.mu.Unlock()
	}
}

// resubscribe retries the subscription with back-off until the consumer
// reads again (this loop's attach, or the recovery's) or drains. Each wait
// is jittered (between half the step and the step), so consumers that
// stalled together do not come back together.
func (k *consumerCore) resubscribe() {
	// done ends the loop when the consumer reads again or drains. It is
	// decided under k.mu, where markStalled records a stall, so a stall
	// that comes after a successful attach is never left without a
	// re-subscriber.
	done := func() (bool, uint64) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.stalled == nil || k.draining {
			k.resub = false
			return true, 0
		}
		return false, k.stallGen
	}
	delay := k.env.recoveryInterval
	warned := false
	for {
		t := time.NewTimer(jitter(delay))
		select {
		case <-t.C:
		case <-k.drainCh:
			t.Stop()
			done()
			return
		}
		over, gen := done()
		if over {
			return
		}
		if g, open := k.host.connection(); !open || g != gen {
			continue // the connection went: its recovery re-attaches
		}
		if !warned {
			k.env.logger.Warn("acemq: a consumer stopped reading; re-subscribing with back-off", "queue", k.queue, "cause", k.stalledErr())
			warned = true
		}
		if attached, err := k.attachOn(k.base, gen); err == nil {
			if attached {
				k.env.logger.Info("acemq: the consumer is reading again", "queue", k.queue)
			}
			delay = k.env.recoveryInterval
			if over, _ := done(); over {
				return
			}
			continue // it stalled again already, or the connection changed
		}
		delay *= 2
		if delay > k.env.recoveryMax {
			delay = k.env.recoveryMax
		}
	}
}

// Stalled reports why the consumer is not reading, or nil.
func (k *consumerCore) stalledErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stalled
}

func (k *consumerCore) ack(dv *delivery) {
	if dv.att.alive() {
		if err := dv.att.ch.Ack(dv.d.DeliveryTag); err != nil {
			k.env.logger.Debug("acemq: an ack did not reach the broker; it will redeliver", "queue", k.queue, "error", err)
		}
	}
	k.release(dv)
}

// handBack returns dv to the broker to be delivered again: every hand-back
// the engine makes (Release, a drain returning what it never started, a
// retry copy that could not be republished, a message that could not be
// set aside). It is a basic.reject with requeue, never a basic.nack: every
// RabbitMQ version counts a reject toward a quorum queue's x-delivery-count
// and delivery limit, while 4.3 does not count a nack, so a message handed
// back by nack for ever was never ended there. On a stream it acks (see
// ConsumerConfig.OnStream). The one exception is a drain's return of what
// never started on a consumer whose waits the queue holds (returnUnrun).
func (k *consumerCore) handBack(dv *delivery) {
	if k.stream {
		k.ack(dv)
		return
	}
	if k.singleActive && k.drainingNow.Load() {
		// The drain closes the channel without a cancel: the broker
		// returns the delivery then, in order with the rest. A reject now
		// would have it delivered straight back to this consumer, still
		// the active one.
		k.release(dv)
		return
	}
	if dv.att.alive() {
		if err := dv.att.ch.Reject(dv.d.DeliveryTag, true); err != nil {
			k.env.logger.Debug("acemq: a hand-back did not reach the broker; it will redeliver", "queue", k.queue, "error", err)
		}
	}
	k.release(dv)
}

func (k *consumerCore) reject(dv *delivery) {
	if k.stream {
		k.ack(dv)
		return
	}
	if dv.att.alive() {
		if err := dv.att.ch.Reject(dv.d.DeliveryTag, false); err != nil {
			k.env.logger.Debug("acemq: a reject did not reach the broker; it will redeliver rather than dead-letter", "queue", k.queue, "error", err)
		}
	}
	k.release(dv)
}

// handle runs one delivery through the interceptors, the decoder and the
// handler (inside run), then settles it.
func (k *consumerCore) handle(dv *delivery, icpt []ConsumeInterceptor, run func(ctx context.Context, env Envelope) (Decision, bool, time.Duration)) {
	env := readEnvelope(dv.d.Headers, dv.d.RoutingKey, dv.d.MessageID, dv.d.ReplyTo)
	env = k.withBrokerAttempts(dv, env)
	ctx, end := k.env.tel.processStart(dv.att.ctx, k.queue, env, &dv.d)
	dv.end = end
	if k.setAsideUnreadable(dv, env) {
		return
	}
	if len(icpt) > 0 {
		in := Inbound{
			Queue: k.queue, Exchange: dv.d.Exchange, RoutingKey: dv.d.RoutingKey,
			ContentType: dv.d.ContentType, Body: dv.d.Body, Redelivered: dv.d.Redelivered, Envelope: env,
		}
		if err := runConsumeInterceptors(ctx, icpt, &in); err != nil {
			env = in.Envelope
			if IsRetryable(err) {
				k.settle(dv, env, Retry(err), false, 0)
				return
			}
			k.settleAside(dv, env, DeadLetterQueue(k.queue), "an interceptor refused it: "+errText(err), ConsumeDeadLettered, false, 0)
			return
		}
		env = in.Envelope
	}
	dec, handled, dur := run(ctx, env)
	if !handled && dec.kind == decPark && dur < 0 {
		k.settleAside(dv, env, ParkedQueue(k.queue), "could not be decoded: "+errText(dec.err), ConsumeParked, false, 0)
		return
	}
	if !dv.att.alive() {
		// The handler outlived its channel: the decision is discarded; the
		// broker redelivers.
		k.release(dv)
		return
	}
	k.settle(dv, env, dec, handled, dur)
}

func runConsumeInterceptors(ctx context.Context, icpt []ConsumeInterceptor, in *Inbound) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("acemq: a consume interceptor panicked: %v", r)
		}
	}()
	for _, ic := range icpt {
		if err := ic(ctx, in); err != nil {
			return err
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "no reason was given"
	}
	return err.Error()
}

// releaseAll releases every delivery still held: its channel is gone, so
// the broker has it back, and a decision that comes later is discarded.
func (k *consumerCore) releaseAll() {
	k.omu.Lock()
	left := make([]*delivery, 0, len(k.held))
	for _, dv := range k.held {
		if !dv.settled.Load() {
			left = append(left, dv)
		}
	}
	k.omu.Unlock()
	for _, dv := range left {
		k.release(dv)
	}
}
