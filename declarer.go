package acemq

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/acemq-go/acemq/transport"
)

// declarer declares on one channel for as long as the broker accepts, and
// opens a fresh one only after a refusal (which closes the channel it was
// made on, as AMQP does). Declaring many entities costs one round trip
// each instead of three (open, declare, close). Not safe for concurrent
// use: give each goroutine its own.
type declarer struct {
	open channelOpener
	ch   transport.Channel
}

// declare declares d, passively when passive is set.
func (dc *declarer) declare(ctx context.Context, d Declaration, passive bool) error {
	if dc.ch != nil {
		select {
		case <-dc.ch.Done():
			dc.ch = nil
		default:
		}
	}
	if dc.ch == nil {
		ch, err := dc.open(ctx)
		if err != nil {
			return err
		}
		dc.ch = ch
	}
	err := declareOn(ctx, dc.ch, d, passive)
	if err != nil {
		dc.close()
	}
	return err
}

// close closes the current channel, if any.
func (dc *declarer) close() {
	if dc.ch != nil {
		_ = dc.ch.Close()
		dc.ch = nil
	}
}

// declareOn declares d on ch, passively when passive is set.
func declareOn(ctx context.Context, ch transport.Channel, d Declaration, passive bool) error {
	switch d.Kind {
	case DeclExchange:
		spec := d.Exchange
		spec.Passive = passive
		return ch.DeclareExchange(ctx, spec)
	case DeclQueue:
		spec := d.Queue
		spec.Passive = passive
		_, err := ch.DeclareQueue(ctx, spec)
		return err
	case DeclBinding:
		return ch.BindQueue(ctx, d.Binding)
	}
	return errors.New("acemq: unknown declaration kind")
}

// recoveryWidth is how many channels a recovery restores on at once. The
// broker answers each channel's calls in turn (amqp091-go also serialises
// synchronous calls per channel), so re-declaring a large topology one call
// after another made the recovery gap grow with it; eight channels in
// parallel keep it nearly flat without flooding the broker.
const recoveryWidth = 8

// attachWidth is how many consumers a recovery opens channels for, and
// then subscribes, at once. Opening a channel costs the broker more than a
// pipelined declaration, and the consumers' channels open while the
// declarations are restored, so they must keep pace with them: with 8 at a
// time, 200 consumers' channels took longer than their 1,001 declarations
// (drill_recovery_test.go); with 32 they finish first.
const attachWidth = 32

// inParallel calls fn(ctx, worker, i) for every i in [0, n) on at most
// width goroutines, which it starts and waits for. worker (0 ≤ worker <
// width) numbers the goroutine, so fn can keep per-goroutine state. The
// first error cancels ctx for the others and is returned once all stopped.
func inParallel(ctx context.Context, n, width int, fn func(ctx context.Context, worker, i int) error) error {
	if width > n {
		width = n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := 0; w < width; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, w, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
