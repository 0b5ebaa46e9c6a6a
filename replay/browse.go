package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
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
// each with basic.get, hands it to visit in queue order, and holds it
// unacknowledged until the pass ends; then it returns every one of them
// (nack with requeue, last first, which puts them back in their order at
// the head of the queue). Holding them until the end is what keeps a
// returned message from being taken again by the same pass.
//
// What a look changes: every message read comes back with the
// redelivered flag set; messages that arrive while Browse holds the head
// stay behind the ones it returns, so order is kept. Nothing is lost or
// copied: a message is only ever requeued, never republished, and if the
// channel is lost the broker requeues what it held.
//
// visit must not settle the message and must not keep it past its call
// (the body may be kept). It returns false to stop early. Browse examines
// at most the messages present when it starts, so messages that keep
// arriving do not make it run forever. It returns how many it read.
//
// Two Browse calls on one queue at once, or a Browse beside a replay, see
// fewer messages each (a held message is invisible to the other); callers
// that share a queue serialise them (the console holds one lock per
// queue). Safe for concurrent use otherwise.
func Browse(ctx context.Context, conn *acemq.Conn, queue string, limit int, visit func(*acemq.Pulled) bool) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	info, err := conn.QueueInfo(ctx, queue)
	if err != nil {
		return 0, err
	}
	puller, err := conn.NewPuller(ctx)
	if err != nil {
		return 0, fmt.Errorf("acemq: cannot open a channel to read %q: %w", queue, err)
	}
	var held []*acemq.Pulled
	defer func() {
		returned := true
		for i := len(held) - 1; i >= 0; i-- {
			if held[i].Nack(true) != nil {
				returned = false
				break // the channel is gone: the broker returns them
			}
		}
		if returned && len(held) > 0 {
			awaitReturned(ctx, conn, queue, info.Messages)
		}
		_ = puller.Close()
	}()
	n := min(limit, info.Messages)
	for len(held) < n {
		if err := ctx.Err(); err != nil {
			return len(held), err
		}
		m, ok, err := puller.Pull(ctx, queue)
		if err != nil {
			return len(held), err
		}
		if !ok {
			break
		}
		held = append(held, m)
		if visit != nil && !visit(m) {
			break
		}
	}
	return len(held), nil
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
