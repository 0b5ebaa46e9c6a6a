package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

// replayOptions bound one replay pass (behaviour §7.4).
type replayOptions struct {
	Limit        int              // 0 = no limit
	Filter       replay.Predicate // nil = every message
	KeepAttempts bool
	// Progress, when set, shows how far the pass has got.
	Progress io.Writer
	// Read are the options a filtered pass reads with (the management API,
	// --unsafe-read): declined messages are handed back.
	Read []replay.Option
	// Present is the source's count when the command has made it
	// (requireQueue with Read); nil: replayQueue counts. Either way the
	// pass takes that one count (replay.Counted) rather than asking again.
	Present *int
}

// replayQueue checks the names, then moves messages from a {q}.dlq or
// {q}.parked queue back to {q} with the replay package. Each sentence it
// returns says what to do.
func replayQueue(ctx context.Context, c *acemq.Conn, source string, o replayOptions) (replay.Report, error) {
	if !isSetAside(source) {
		return replay.Report{}, fmt.Errorf("%q is not a dead-letter queue; replay moves messages from QUEUE.dlq or QUEUE.parked back to QUEUE", source)
	}
	target := sourceOf(source)
	var present int
	if o.Present != nil {
		present = *o.Present
	} else {
		n, err := requireQueue(ctx, c, source, o.Read...)
		if err != nil {
			return replay.Report{}, err
		}
		present = n
	}
	if _, err := requireQueue(ctx, c, target); err != nil {
		return replay.Report{}, fmt.Errorf("cannot replay into %q: it does not exist; declare it first (acemq topology apply)", target)
	}
	var opts []replay.Option
	if o.Limit > 0 {
		opts = append(opts, replay.Limit(o.Limit))
	}
	if o.Filter != nil {
		opts = append(opts, replay.Filter(o.Filter))
	}
	if o.KeepAttempts {
		opts = append(opts, replay.KeepAttempts())
	}
	opts = append(opts, o.Read...)
	opts = append(opts, replay.Counted(present))
	if o.Progress != nil && present > 0 {
		stop := watchDepth(ctx, c, source, present, newProgress(o.Progress, "replaying "+source, int64(present)))
		defer stop()
	}
	rep, err := replay.Queue(ctx, c, source, opts...)
	var unsafe *replay.UnsafeReadError
	if errors.As(err, &unsafe) {
		return rep, err
	}
	if err != nil && rep.Reason != replay.Failed {
		return rep, fmt.Errorf("the replay of %s stopped after moving %d (%s); run it again to continue", source, rep.Moved, sentence(err))
	}
	return rep, nil
}

// watchDepth reports progress as the source drains (the replay package has
// no per-message callback), checking its depth every 200ms until stop.
func watchDepth(ctx context.Context, c *acemq.Conn, queue string, start int, bar *progress) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		shown := 0
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if info, err := c.QueueInfo(ctx, queue); err == nil && start-info.Messages > shown {
				bar.Add(int64(start - info.Messages - shown))
				shown = start - info.Messages
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		bar.Done()
	}
}

// headerInt reads an integer header of any wire width.
func headerInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int8:
		return int(x)
	case int16:
		return int(x)
	case int32:
		return int(x)
	case int64:
		return int(x)
	case uint8:
		return int(x)
	case uint16:
		return int(x)
	case uint32:
		return int(x)
	case uint64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}
