package acemq

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// declared is what a Conn has declared (Apply, consumers' dead-letter
// halves), in original order and once each, so that a recovery declares
// it again. It is safe for concurrent use.
type declared struct {
	mu    sync.Mutex
	decls []Declaration
	keys  map[string]bool
}

func declKey(d Declaration) string {
	switch d.Kind {
	case DeclExchange:
		return "e:" + d.Exchange.Name
	case DeclQueue:
		return "q:" + d.Queue.Name
	default:
		return "b:" + d.Binding.Queue + "\x00" + d.Binding.Exchange + "\x00" + d.Binding.RoutingKey
	}
}

// record remembers decls for re-declaration after recovery.
func (r *declared) record(decls []Declaration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]bool{}
	}
	for _, d := range decls {
		k := declKey(d)
		if r.keys[k] {
			continue
		}
		r.keys[k] = true
		r.decls = append(r.decls, d)
	}
}

// forget stops re-declaring decls.
func (r *declared) forget(decls []Declaration) {
	drop := map[string]bool{}
	for _, d := range decls {
		drop[declKey(d)] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.decls[:0]
	for _, d := range r.decls {
		k := declKey(d)
		if drop[k] {
			delete(r.keys, k)
			continue
		}
		kept = append(kept, d)
	}
	r.decls = kept
}

// list snapshots the declarations in order.
func (r *declared) list() []Declaration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Declaration(nil), r.decls...)
}

// withDeadLettering reports whether q was declared with broker
// dead-lettering.
func (r *declared) withDeadLettering(q string) bool {
	_, ok := r.queueArg(q, "x-dead-letter-exchange")
	return ok
}

// asStream reports whether q was declared as a stream queue.
func (r *declared) asStream(q string) bool {
	typ, _ := r.queueArg(q, "x-queue-type")
	return typ == "stream"
}

// queueArg returns argument name of queue q as declared, and whether q
// was declared with it.
func (r *declared) queueArg(q, name string) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.decls {
		if d.Kind == DeclQueue && d.Queue.Name == q {
			v, ok := d.Queue.Args[name]
			return v, ok
		}
	}
	return nil, false
}

// redeclarer declares a recovery's declarations again on the new
// connection, on channels from open.
type redeclarer struct {
	open   channelOpener
	report func(refusal error) // logs a refusal that is skipped
}

// redeclare declares decls again: exchanges, then queues, then bindings,
// each kind split over recoveryWidth channels that work at once. A channel
// that offers transport.Pipeliner sends its share without waiting for each
// answer and waits once; when that fails (a refusal, an exclusive queue
// not reaped yet) its share is declared again one by one, which says what
// was refused. It returns the refusals it skipped, in declaration order,
// or the error that ends this attempt.
func (r redeclarer) redeclare(ctx context.Context, decls []Declaration) ([]error, error) {
	refused := make([]error, len(decls))
	for _, kind := range []DeclKind{DeclExchange, DeclQueue, DeclBinding} {
		var idx []int
		for i, d := range decls {
			if d.Kind == kind {
				idx = append(idx, i)
			}
		}
		width := recoveryWidth
		if width > len(idx) {
			width = len(idx)
		}
		err := inParallel(ctx, width, width, func(ctx context.Context, _, w int) error {
			var share []int
			for j := w; j < len(idx); j += width {
				share = append(share, idx[j])
			}
			if r.pipelined(ctx, decls, share) {
				return nil
			}
			dc := declarer{open: r.open}
			defer dc.close()
			for _, i := range share {
				skip, err := r.redeclareOne(ctx, &dc, decls[i])
				if err != nil {
					return err
				}
				refused[i] = skip
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var skipped []error
	for _, err := range refused {
		if err != nil {
			skipped = append(skipped, err)
		}
	}
	return skipped, nil
}

// pipelined declares decls[share] on one channel without waiting for each
// answer, and reports whether the broker accepted every one. False means
// nothing is known: the caller declares them again one by one.
func (r redeclarer) pipelined(ctx context.Context, decls []Declaration, share []int) bool {
	ch, err := r.open(ctx)
	if err != nil {
		return false
	}
	defer ch.Close()
	p, ok := ch.(transport.Pipeliner)
	if !ok {
		return false
	}
	for _, i := range share {
		d := decls[i]
		switch d.Kind {
		case DeclExchange:
			err = p.DeclareExchangeNoWait(d.Exchange)
		case DeclQueue:
			if d.Queue.Name == "" {
				return false
			}
			err = p.DeclareQueueNoWait(d.Queue)
		case DeclBinding:
			err = p.BindQueueNoWait(d.Binding)
		}
		if err != nil {
			return false
		}
	}
	return p.Sync(ctx) == nil
}

// redeclareOne declares d on dc. It returns the broker's refusal when the
// declaration is skipped, or an error that ends the recovery attempt.
func (r redeclarer) redeclareOne(ctx context.Context, dc *declarer, d Declaration) (skipped, fatal error) {
	for try := 0; ; try++ {
		err := dc.declare(ctx, d, false)
		if err == nil {
			return nil, nil
		}
		err = fmt.Errorf("acemq: the broker refused to declare %s: %w", describeDecl(d), err)
		code := transport.Code(err)
		if code == transport.CodeResourceLocked && try < 5 {
			// The old connection's exclusive queue is not reaped yet.
			if sleepCtx(ctx, time.Duration(try+1)*200*time.Millisecond) != nil {
				return nil, ctx.Err()
			}
			continue
		}
		// 404 on a re-declaration means what it names is unavailable,
		// not wrong: in a cluster, a classic queue whose home node is
		// the one lost ("home node ... is down or inaccessible") or
		// whose process is stopping. It returns with its node; holding
		// every other queue, consumer and publish back until then would
		// turn one node's loss into an outage. Skipped and reported.
		if code == transport.CodePreconditionFailed || code == transport.CodeAccessRefused || code == transport.CodeNotFound {
			r.report(err)
			return err, nil
		}
		return nil, err
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
