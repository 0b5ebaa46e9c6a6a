// Package group runs several competing consumers of one queue as a unit
// (behaviour §7.11), and runs a service's consumers until it is told to
// stop (Run).
//
// A group's members are ordinary acemq consumers: each has its own
// channel and its own prefetch, so one slow member does not hold
// deliveries the others could run, and the broker spreads the queue
// across them. Members are tagged acemq-{queue}-{i}, i from 1, and keep
// their tags across recoveries.
//
// The manual's page on consumer groups: https://github.com/acemq-go/acemq/blob/main/docs/groups.md
package group

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/acemq-go/acemq"
)

// Group is a set of competing consumers of one queue, started together
// and drained together. Its methods are safe for concurrent use.
type Group struct {
	queue   string
	members []*acemq.Consumer

	closeOnce sync.Once
	closeErr  error
}

// Tag is the consumer tag of member i (1-based) of a group on queue:
// acemq-{queue}-{i} (behaviour §3.12).
func Tag(queue string, i int) string {
	return "acemq-" + queue + "-" + strconv.Itoa(i)
}

// Consume starts size consumers of queue, each running h with opts (the
// same options acemq.Consume takes: prefetch, concurrency and retry apply
// to each member; cfg.Tag is replaced by the member's
// group tag). On a queue declared with x-single-active-consumer, set
// cfg.SingleActive: a graceful Close of the active group then hands over
// in the queue's order (acemq.ConsumerConfig.SingleActive); without it
// the instance that takes over may get newer messages before those the
// closing one held.
//
// size must be at least 1, or Consume returns an *acemq.ConfigurationError
// and starts nothing. If a member cannot start, the members already
// started are closed (drained) before Consume returns the error, which
// says which member failed: acemq: cannot start consumer 3 of 4 on "q":
// …, joined to any error closing the others. The start error stays
// reachable with errors.Is and errors.As.
func Consume[T any](ctx context.Context, c *acemq.Conn, queue string, size int, h acemq.Handler[T], cfg acemq.ConsumerConfig) (*Group, error) {
	if size < 1 {
		return nil, &acemq.ConfigurationError{Option: "group size", Reason: fmt.Sprintf("a consumer group needs at least 1 member, got %d; pass 1 or more", size)}
	}
	members, err := start(ctx, queue, size, func(ctx context.Context, i int) (*acemq.Consumer, error) {
		o := cfg
		o.Tag = Tag(queue, i)
		return acemq.Consume(ctx, c, queue, h, o)
	})
	if err != nil {
		return nil, err
	}
	return &Group{queue: queue, members: members}, nil
}

// start starts size members with startOne, 1-based; on a failure it
// closes those started and says which one failed.
func start(ctx context.Context, queue string, size int, startOne func(ctx context.Context, i int) (*acemq.Consumer, error)) ([]*acemq.Consumer, error) {
	members := make([]*acemq.Consumer, 0, size)
	for i := 1; i <= size; i++ {
		k, err := startOne(ctx, i)
		if err != nil {
			serr := &StartError{Queue: queue, Member: i, Size: size, Err: err}
			// The caller's ctx may be what failed; the started members
			// still get their drain.
			if cerr := closeAll(context.WithoutCancel(ctx), members); cerr != nil {
				return nil, errors.Join(serr, cerr)
			}
			return nil, serr
		}
		members = append(members, k)
	}
	return members, nil
}

// StartError says which member of a group could not start, and why.
type StartError struct {
	Queue  string
	Member int // 1-based
	Size   int
	Err    error
}

// Error reads acemq: cannot start consumer 3 of 4 on "q": and the cause.
func (e *StartError) Error() string {
	cause := e.Err.Error()
	// acemq.Consume's own errors already say "cannot start consumer on
	// q"; say it once.
	cause = strings.TrimPrefix(cause, "acemq: cannot start consumer on "+strconv.Quote(e.Queue)+": ")
	cause = strings.TrimPrefix(cause, "acemq: ")
	return fmt.Sprintf("acemq: cannot start consumer %d of %d on %q: %s", e.Member, e.Size, e.Queue, cause)
}

// Unwrap returns the member's start error.
func (e *StartError) Unwrap() error { return e.Err }

// Queue is the queue the group consumes.
func (g *Group) Queue() string { return g.queue }

// Size is the number of members.
func (g *Group) Size() int { return len(g.members) }

// Members returns the members in tag order (member 1 first). The slice is
// a copy; closing a member yourself leaves the group smaller.
func (g *Group) Members() []*acemq.Consumer {
	return append([]*acemq.Consumer(nil), g.members...)
}

// InFlight is the number of deliveries received and not yet settled,
// across the members (acemq.Consumer.InFlight summed).
func (g *Group) InFlight() int {
	n := 0
	for _, k := range g.members {
		n += k.InFlight()
	}
	return n
}

// Stalled joins the members' Stalled errors: nil while every member is
// reading its queue.
func (g *Group) Stalled() error {
	var errs []error
	for _, k := range g.members {
		if err := k.Stalled(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.Tag(), err))
		}
	}
	return errors.Join(errs...)
}

// Close drains every member at the same time, under one deadline: ctx's,
// or else each member's drain timeout, all counted from this call (§8
// #34: one deadline, spent once, not one per member). It returns nil or
// the members' errors joined (each *acemq.DrainTimeoutError names the
// deliveries it left to be redelivered). Close is idempotent: later calls
// return the first result.
func (g *Group) Close(ctx context.Context) error {
	g.closeOnce.Do(func() { g.closeErr = closeAll(ctx, g.members) })
	return g.closeErr
}

// closer is anything Run and closeAll drain: consumers, groups, Conns,
// relays.
type closer interface {
	Close(ctx context.Context) error
}

// closeAll closes every member concurrently and joins their errors in
// member order.
func closeAll[C closer](ctx context.Context, cs []C) error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
