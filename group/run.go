package group

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acemq-go/acemq"
)

// Closer is what Run stops: an *acemq.Conn (which drains every consumer
// it started), a *Group, an *acemq.Consumer, an outbox relay — anything
// with a Close that drains within its context's deadline.
type Closer interface {
	Close(ctx context.Context) error
}

// Run is a worker's main loop. It blocks until ctx is done or the process
// receives SIGINT or SIGTERM, then closes every closer at the same time
// under one drain deadline, drain from that moment (drain <= 0 means no
// deadline of Run's own: each closer's own timeout applies). A second
// signal during the drain is not caught by Run: the process ends as it
// would without Run.
//
// Run returns nil when everything drained, or an error that says what did
// not: "acemq: the shutdown drain did not finish within 20s; the
// unsettled deliveries will be redelivered to another consumer: …" for a
// drain that ran out of time, with the closers' errors joined. A service main exits non-zero on it:
//
//	if err := group.Run(context.Background(), 20*time.Second, conn); err != nil {
//		fmt.Fprintln(os.Stderr, err)
//		os.Exit(1)
//	}
func Run(ctx context.Context, drain time.Duration, closers ...Closer) error {
	return run(ctx, drain, closers, nil)
}

// run is Run with a hook called once the signals are being caught.
func run(ctx context.Context, drain time.Duration, closers []Closer, ready func()) error {
	sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	if ready != nil {
		ready()
	}
	<-sig.Done()
	stop() // a second signal ends the process the ordinary way
	dctx := context.WithoutCancel(ctx)
	if drain > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(dctx, drain)
		defer cancel()
	}
	start := time.Now()
	err := closeAll(dctx, closers)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, acemq.ErrDrainTimeout) {
		return fmt.Errorf("acemq: the shutdown drain did not finish within %s; the unsettled deliveries will be redelivered to another consumer: %w", time.Since(start).Round(time.Millisecond), err)
	}
	return fmt.Errorf("acemq: shutting down failed: %w", err)
}
