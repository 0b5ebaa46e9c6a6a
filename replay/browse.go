package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// IsSetAside reports whether queue is a {q}.dlq or {q}.parked queue.
func IsSetAside(queue string) bool {
	return strings.HasSuffix(queue, ".dlq") || strings.HasSuffix(queue, ".parked")
}

// SourceOf is the queue a {q}.dlq or {q}.parked queue belongs to ({q});
// any other name is returned as it is.
func SourceOf(queue string) string {
	if s, ok := strings.CutSuffix(queue, ".dlq"); ok {
		return s
	}
	s, _ := strings.CutSuffix(queue, ".parked")
	return s
}

// Browse looks at up to limit messages of queue without removing any.
// AMQP 0-9-1 cannot read a message without taking it, so Browse takes
// them and puts them all back. It subscribes (basic.consume) on a channel
// of its own with a prefetch of exactly the messages it means to read, so
// the broker streams them without a round trip each; it hands each to
// visit in queue order and holds it unacknowledged until the pass ends.
// Then it cancels its subscriptions and hands every message it holds back
// at once: by closing its channel, or, where that would count toward a
// delivery limit and a nack would not (a quorum queue with a limit on
// RabbitMQ 4.3 and later), with one basic.nack first (requeue;
// transport.Releaser). Either way the broker puts them back in their
// original order at the head of the queue. It waits until the broker
// counts them ready again. Holding them until the
// end is what keeps a returned message from being read twice by the same
// pass. A prefetch cannot exceed 65,535 (basic.qos's field), so a longer
// read subscribes again for each further window while the earlier windows
// stay held.
//
// Browse first counts the queue as Count does (with ManagementAPI, a 0
// from a quorum queue whose leader is not shown to be online is not
// believed): a count that cannot be confirmed is a *CountUnknownError and
// nothing is read. With Counted it takes the caller's count instead and
// asks none.
//
// Before it takes anything, Browse asks what handing messages back would
// do there (Inspect): where it would move a message toward a delivery
// limit (a quorum queue with one, on RabbitMQ before 4.3), hold it back
// (delayed retry on 4.3), or where that cannot be learned (no
// ManagementAPI on RabbitMQ), it reads nothing and returns an
// *UnsafeReadError, unless opts hold AllowUnsafeRead. Other options than
// these three have no effect on Browse.
//
// What a look changes: every message read comes back with the
// redelivered flag set (on a quorum queue before RabbitMQ 4.3 the return
// also counts in x-delivery-count, which Browse allows only where no
// delivery limit acts on it); messages that arrive while Browse holds the
// head stay behind the ones it returns, so order is kept. Nothing is lost
// or copied: a message is only ever requeued, never republished, and if
// the channel is lost the broker requeues what it held (a loss counts as
// a failed delivery on a quorum queue, on every version).
//
// visit gets a read-only view (Remaining is 0): it cannot settle the
// message — Ack and Nack are for messages a Puller took, and on a view
// they return an error (every message still goes back at the end). The
// view may be kept after the call. visit returns false to stop early.
// Browse examines at most the messages present when it starts, so
// messages that keep arriving do not make it run forever; if something
// else takes messages meanwhile, it stops once the queue has had none
// ready for a second; if messages stay ready but none reach it for 10 s
// (another consumer holds the queue), it fails saying so. It returns how
// many it read.
//
// Two Browse calls on one queue at once, or a Browse beside a replay, see
// fewer messages each (a held message is invisible to the other); callers
// that share a queue serialise them (the console holds one lock per
// queue). Safe for concurrent use otherwise.
func Browse(ctx context.Context, conn *acemq.Conn, queue string, limit int, visit func(*acemq.Pulled) bool, opts ...Option) (read int, err error) {
	if limit <= 0 {
		return 0, nil
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkCounted(&cfg); err != nil {
		return 0, err
	}
	present, err := presentIn(ctx, conn, queue, &cfg)
	if err != nil {
		return 0, err
	}
	n := min(limit, present)
	if n == 0 {
		return 0, nil
	}
	a, err := inspect(ctx, conn, queue, &cfg)
	switch {
	case cfg.unsafe:
	case err != nil:
		return 0, err
	case !a.Safe:
		return 0, &UnsafeReadError{Access: a}
	}
	ch, err := conn.Channel(ctx)
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot open a channel to read %q: %w", queue, err)
	}
	defer func() {
		// What is ready now is what the pass does not hold; once the
		// broker counts that plus what was read, it has taken them back
		// (a queue requeues a channel's messages in one step). Something
		// else may have taken or added messages meanwhile, hence the cap.
		want := present
		if read > 0 {
			if now, err := conn.QueueInfo(context.WithoutCancel(ctx), queue); err == nil {
				want = min(want, now.Messages+read)
			}
		}
		// Every subscription is cancelled by now. Where the queue keeps
		// the place of what a closed channel hands back (and counts
		// nothing, or counts where no limit acts), the close returns
		// everything; where it counts toward a limit that a nack does not
		// (RabbitMQ 4.3+), one release hands everything back first and the
		// close then holds nothing. If either fails the channel is gone,
		// and the broker has returned them already.
		if r, ok := ch.(transport.Releaser); ok && a.ReturnByNack {
			_ = r.ReleaseAll()
		}
		if ch.Close() == nil && read > 0 {
			awaitReturned(ctx, conn, queue, want)
		}
	}()
	b := browser{conn: conn, ch: ch, queue: queue, visit: visit}
	for window := 1; read < n; window++ {
		want := min(n-read, maxWindow)
		got, more, err := b.window(ctx, window, want)
		read += got
		if err != nil || !more {
			return read, err
		}
	}
	return read, nil
}

// maxWindow is the largest prefetch basic.qos can carry (a 16-bit field).
// Tests lower it to read several windows from a small queue.
var maxWindow = 65535

// exhaustedAfter is how long the queue must have had nothing ready, with
// nothing delivered, before a read that got fewer messages than it
// expected stops: something else took them.
const exhaustedAfter = time.Second

// stalledAfter is how long messages may stay ready with none reaching the
// pass before it gives up: another consumer holds the queue (single active
// consumer, consumer priorities). Tests shorten it.
var stalledAfter = 10 * time.Second

// browser is one Browse pass.
type browser struct {
	conn  *acemq.Conn
	ch    transport.Channel
	queue string
	visit func(*acemq.Pulled) bool
}

// window subscribes with a prefetch of want, reads want messages (fewer
// when the queue runs dry or visit says stop) and cancels the
// subscription; what it read stays held on the channel. more is false
// when the pass is over.
func (b *browser) window(ctx context.Context, number, want int) (got int, more bool, err error) {
	if err := b.ch.Qos(want); err != nil {
		return 0, false, fmt.Errorf("acemq: cannot set the prefetch to read %q: %w", b.queue, err)
	}
	tag := fmt.Sprintf("acemq-browse-%d", number)
	deliveries, err := b.ch.Consume(ctx, transport.ConsumeSpec{Queue: b.queue, Tag: tag})
	if err != nil {
		return 0, false, fmt.Errorf("acemq: cannot subscribe to %q to read it: %w", b.queue, err)
	}
	defer func() {
		// The prefetch is full (or the pass is ending): cancel so the next
		// window's subscription starts where this one stopped. A failed
		// cancel is harmless, the channel closes at the end of the pass.
		if cerr := b.ch.Cancel(context.WithoutCancel(ctx), tag); cerr != nil && err == nil && more {
			err, more = fmt.Errorf("acemq: cannot end the subscription reading %q: %w", b.queue, cerr), false
		}
	}()
	const idle = 250 * time.Millisecond
	timer := time.NewTimer(idle)
	defer timer.Stop()
	var dry, quiet time.Duration
	for got < want {
		select {
		case d, ok := <-deliveries:
			if !ok {
				if cause := b.ch.Err(); cause != nil {
					return got, false, fmt.Errorf("acemq: reading %q stopped: %w", b.queue, cause)
				}
				return got, false, fmt.Errorf("acemq: the broker ended the subscription reading %q (was the queue deleted?)", b.queue)
			}
			got++
			if b.visit != nil && !b.visit(view(d, b.queue)) {
				return got, false, nil
			}
			dry, quiet = 0, 0
			timer.Reset(idle)
		case <-ctx.Done():
			return got, false, ctx.Err()
		case <-timer.C:
			info, err := b.conn.QueueInfo(ctx, b.queue)
			if err != nil {
				return got, false, err
			}
			quiet += idle
			if info.Messages == 0 {
				if dry += idle; dry >= exhaustedAfter {
					return got, false, nil
				}
			} else if dry = 0; quiet >= stalledAfter {
				return got, false, fmt.Errorf("acemq: %q has %d messages ready but none reached the reader for %v; another consumer holds the queue (single active consumer or a higher priority): stop it, or read while it is stopped", b.queue, info.Messages, stalledAfter)
			}
			timer.Reset(idle)
		}
	}
	return got, true, nil
}

// view is a delivery as visit sees it.
func view(d transport.Delivery, queue string) *acemq.Pulled {
	return &acemq.Pulled{
		Envelope:      acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.ReplyTo),
		Queue:         queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		ReplyTo:       d.ReplyTo,
		MessageID:     d.MessageID,
		CorrelationID: d.CorrelationID,
		Headers:       map[string]any(d.Headers),
		Body:          d.Body,
		Redelivered:   d.Redelivered,
		Priority:      d.Priority,
	}
}

// awaitReturned waits until queue counts at least want ready messages
// again. RabbitMQ takes returned messages back asynchronously: a count
// asked on another channel right after the nacks, as a replay's budget
// is, can miss thousands of them. The wait goes on while the count keeps
// rising and ends once it has not risen for 10 s (something else may be
// consuming, so the count may never get there) or after a minute; nothing
// is lost either way.
func awaitReturned(ctx context.Context, conn *acemq.Conn, queue string, want int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last, progress := -1, time.Now()
	for {
		info, err := conn.QueueInfo(ctx, queue)
		if err != nil || info.Messages >= want {
			return
		}
		if info.Messages > last {
			last, progress = info.Messages, time.Now()
		} else if time.Since(progress) > 10*time.Second {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
