package acemq

import (
	"context"
	"sync"
	"time"
)

// drainAll drains consumers concurrently under one deadline and reports
// what was left unsettled.
func drainAll(ctx context.Context, cores []*consumerCore, deadline time.Time, timeout time.Duration) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	stranded := map[string]int{}
	for _, k := range cores {
		wg.Add(1)
		go func(k *consumerCore) {
			defer wg.Done()
			n := k.drain(ctx, deadline)
			if n > 0 {
				mu.Lock()
				stranded[k.queue] += n
				mu.Unlock()
			}
		}(k)
	}
	wg.Wait()
	if len(stranded) == 0 {
		return nil
	}
	return &DrainTimeoutError{Timeout: timeout, Stranded: stranded}
}

// drain stops one consumer (behaviour §3.11) and returns how many
// deliveries were left unsettled. A second call waits for the first.
func (k *consumerCore) drain(ctx context.Context, deadline time.Time) int {
	first := false
	k.drainOnce.Do(func() { first = true })
	if !first {
		select {
		case <-k.closed:
			return k.stranded
		case <-ctx.Done():
			return 0
		}
	}
	defer close(k.closed)
	k.mu.Lock()
	k.draining = true
	k.drainingNow.Store(true)
	att := k.att
	k.mu.Unlock()
	// Prefetched deliveries no worker has started are taken out now, not
	// when a worker frees up: a stuck handler must not strand them.
	k.requeueUnstarted()
	k.host.left(k)

	// Stop new deliveries first (§3.11: cancel, then wind down); the
	// channel stays open for the acks to come. A single-active consumer
	// sends no cancel (ConsumerConfig.SingleActive): the cancel would
	// activate the next consumer at once, with what this one never
	// prefetched ahead of what it hands back. It stays subscribed, starts
	// nothing more (draining is set), and ends by closing its channel
	// below, which returns every unsettled delivery in order first.
	if att != nil && att.alive() && !k.singleActive {
		cctx, cancel := context.WithDeadline(context.Background(), deadline)
		_ = att.ch.Cancel(cctx, k.tag)
		cancel()
	}
	// Only then hand back what was taken out unrun, and cut the
	// in-consumer retry waits short: a message handed back while the
	// subscription still stood would be delivered to this consumer again
	// and handed back again, each time counted toward the delivery limit,
	// and the copies the waits put back would be too.
	k.mu.Lock()
	k.cancelled = true
	unrun := k.unrun
	k.unrun = nil
	close(k.drainCh)
	k.mu.Unlock()
	for _, dv := range unrun {
		k.returnUnrun(dv)
	}
	// Prefetched deliveries no worker has started go back now, unrun: a
	// worker busy in a slow handler would reach them only after it returns,
	// and they would be counted stranded.
	k.requeueUnstarted()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	wait := func(t <-chan time.Time) bool {
		select {
		case <-k.idle():
			return true
		case <-t:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// Idle can fire and a delivery the broker sent before its cancel-ok
	// still be held after it (the reader had not taken it yet): that one
	// is run as "back unrun" by a worker, so wait again for it rather than
	// report it stranded, until the deadline.
	settledAll := func() bool {
		for {
			if !wait(timer.C) {
				return false
			}
			if k.unsettled() == 0 {
				return true
			}
		}
	}
	if !settledAll() {
		// Deadline: cancel handler contexts, then a short grace in which
		// returned decisions are still carried out.
		k.hardStop()
		grace := time.NewTimer(drainGrace)
		wait(grace.C)
		grace.Stop()
	}
	stranded := k.unsettled()
	k.stranded = stranded
	k.hardStop()
	// Release the channel last: whatever is still held returns to the
	// broker, and later decisions are discarded.
	if att != nil {
		_ = att.ch.Close()
	}
	k.releaseAll()
	// Delayed hops and the re-subscriber end with base (cancelled above);
	// they are waited for so that nothing publishes after the drain.
	k.waitBackground()
	// The transport closes a subscription's delivery channel when its
	// channel ends, so the readers finish; then the workers can stop.
	k.readers.Wait()
	k.closeWork()
	return stranded
}

// requeueUnstarted hands back every delivery waiting in k.work (or a
// lane), unrun (handBackUnrun). The caller has set draining, so the
// readers add no more.
func (k *consumerCore) requeueUnstarted() {
	for {
		dv, ok := k.takeQueued()
		if !ok {
			return
		}
		k.handBackUnrun(dv)
	}
}

// handBackUnrun hands back a delivery the drain returns unrun: at once
// once the drain's basic.cancel is done, else kept until it is (the drain
// then hands it back), so the broker cannot deliver it to this consumer
// again in between. A single-active consumer leaves it unsettled for the
// drain's channel close to return.
func (k *consumerCore) handBackUnrun(dv *delivery) {
	if k.singleActive {
		// Left unsettled: the drain's channel close returns it, in order.
		k.release(dv)
		return
	}
	k.mu.Lock()
	if !k.cancelled {
		k.unrun = append(k.unrun, dv)
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	k.returnUnrun(dv)
}

// returnUnrun hands back a delivery the drain returns unrun: a basic.reject
// with requeue (handBack), counted like every hand-back, except on a
// consumer whose waits the queue holds (RabbitMQ 4.3's delayed retry,
// type failed), where it is a basic.nack with requeue. 4.3 neither counts
// a nack as a failed delivery (the attempt the handler sees comes from
// that count) nor holds it back, so a shutdown costs no attempt and delays
// nothing; each drain returns it at most once, after its basic.cancel.
func (k *consumerCore) returnUnrun(dv *delivery) {
	if !k.waitsInQueue || k.stream {
		k.handBack(dv)
		return
	}
	if dv.att.alive() {
		if err := dv.att.ch.Nack(dv.d.DeliveryTag, true); err != nil {
			k.env.logger.Debug("acemq: a hand-back did not reach the broker; it will redeliver", "queue", k.queue, "error", err)
		}
	}
	k.release(dv)
}
