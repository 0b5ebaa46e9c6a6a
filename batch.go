package acemq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// publishAll is the one write-and-confirm path: Send (a batch of one),
// SendAll and library hops all take it. For every member of prs whose
// errs entry is still nil it admits the member, takes a permit and writes
// it; once all are written it waits, within one confirm timeout and ctx,
// for the broker's answers. errs[i] ends as member i's result, and
// prs[i].sent.Outcome says how it went out.
//
// An application member (hop false) is admitted as Send admits: refused at
// once, or with Config.WaitForRecovery waiting out a recovery within ctx (or
// the confirm timeout). One whose write meets a loss the Conn had not
// noticed yet (nothing written) is, with Config.WaitForRecovery, admitted
// again once the Conn's state changes, so it too waits out the recovery.
// Hop members were admitted by the caller and are always confirmed.
// When no permit comes free in time, the members after it fail the same
// way without waiting again.
func (p *publishing) publishAll(ctx context.Context, prs []prepared, errs []error, hop bool) {
	b := p.getBatch(len(prs))
	wctx := ctx
	if !hop {
		var cancel context.CancelFunc
		wctx, cancel = p.admissionContext(ctx)
		defer cancel()
	}
	var stop *PublishError  // no permit came free: the rest fail alike
	hd := holding{ctx: ctx} // released before anything below can wait
	for i := range prs {
		if errs[i] != nil {
			continue
		}
		if stop != nil {
			errs[i] = newPubErr(&prs[i].msg, OutcomeFailed, stop.Reason, false, stop.Err)
			continue
		}
		for {
			var changed <-chan struct{} // only Config.WaitForRecovery waits on it
			if !hop && p.cfg.waitForRecovery {
				changed = p.life.changes()
			}
			err, noPermit := p.write(ctx, wctx, &prs[i], b, i, hop, &hd)
			if noPermit {
				stop = err.(*PublishError) // write says so only for acquire's *PublishError
			}
			if err == nil || hop || noPermit {
				errs[i] = err
				break
			}
			hd.release()
			if !p.awaitNoticedLoss(wctx, err, changed) {
				errs[i] = err
				break
			}
		}
	}
	hd.release() // the batch's bytes go out before its confirms are awaited
	waitErr := b.wait(ctx, p.cfg.confirmTimeout)
	slots, reusable := b.finalize()
	for i := range prs {
		if errs[i] != nil || !slots[i].written {
			continue
		}
		msg := &prs[i].msg
		switch {
		case slots[i].werr != nil && (!slots[i].done || slots[i].cf.Outcome == transport.Lost && !brokerSaid(slots[i].cf.Err)):
			errs[i] = newPubErr(msg, OutcomeFailed, writeFailedReason(slots[i].werr), true, slots[i].werr)
		case slots[i].done:
			errs[i] = classify(msg, slots[i].cf)
		case waitErr == errConfirmTimeout:
			errs[i] = newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonNotConfirmed, p.cfg.confirmTimeout), true, nil)
		default:
			errs[i] = newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonStoppedWait, waitErr), true, waitErr)
		}
	}
	if reusable {
		p.putBatch(b) // after the slots were read
	}
}

// write admits and writes one member. noPermit reports that err is
// acquire's: no permit came free within the confirm timeout or ctx.
// It releases hd before anything that can wait (admission waiting out a
// recovery, the permit slow path, a channel repair) and before an
// unconfirmed write, whose failure a confirm could not report.
func (p *publishing) write(ctx, wctx context.Context, pr *prepared, b *batch, i int, hop bool, hd *holding) (err error, noPermit bool) {
	msg := &pr.msg
	if !hop {
		// refusal is admit when nothing need be waited out; only a wait
		// lets go of the hold.
		aerr := p.refusal(msg)
		if aerr != nil && p.cfg.waitForRecovery {
			hd.release()
			aerr = p.admit(wctx, msg)
		}
		if aerr != nil {
			return aerr, false
		}
		if !p.cfg.confirms && !msg.Mandatory {
			hd.release()
			pr.sent.Outcome = OutcomePublished
			return p.publishUnconfirmed(pr.ctx, msg), false
		}
	}
	pr.sent.Outcome = OutcomeConfirmed
	if pe := p.acquireHeld(ctx, msg, hd); pe != nil {
		return pe, true
	}
	// Recovery may have begun while this publish waited for a permit.
	if err := p.refusal(msg); err != nil {
		p.permits.release()
		return err, false
	}
	b.expect(i)
	_, err = p.writeHeld(pr.ctx, msg, b.dones[i], hd)
	if err != nil && errors.Is(err, transport.ErrNotWritten) {
		// Not written: the callback will never be called.
		p.permits.release()
		b.unexpect(i)
		if uerr := unencodable(msg, err); uerr != nil {
			return uerr, false
		}
		if rerr := p.refusal(msg); rerr != nil {
			return rerr, false
		}
		if cerr := pr.ctx.Err(); cerr != nil {
			// Another write held the socket (the broker not reading it)
			// until the caller's context ended.
			return newPubErr(msg, OutcomeFailed, fmt.Sprintf(reasonStoppedBeforeWrite, cerr), false, cerr), false
		}
		return newPaused(msg, reasonLostWaiting, ""), false
	}
	if err != nil {
		// Perhaps written: the write failed or was abandoned part way
		// (its connection is closed). The transport answers Lost; the
		// member's answer says why.
		b.writeFailed(i, err)
	}
	return nil, false
}

// holding is one writer's hold on its publishing connection's writes
// (transport.Holder): taken before the first write of a run, so the run's
// publishes leave in one socket write, and released before the writer
// waits for anything. The zero value holds nothing.
type holding struct {
	ctx      context.Context // bounds the write of what is kept (transport.Holder)
	h        transport.Holder
	last     transport.Holder // the one held before, for resume
	deadline time.Time        // the latest its bytes may go out; zero for none
}

// on makes sure the connection of set is held, letting go of another one
// held before (a recovery installed a new set mid-run).
func (hd *holding) on(set *pubSet) {
	h, ok := set.conn.(transport.Holder)
	if !ok || h == hd.h {
		return
	}
	hd.release()
	h.Hold(hd.deadline)
	hd.h, hd.last = h, h
}

// resume holds again the connection held last, after a release (the
// writer goes on writing on the same publisher).
func (hd *holding) resume() {
	if hd.h == nil && hd.last != nil {
		hd.last.Hold(hd.deadline)
		hd.h = hd.last
	}
}

// release lets go of the hold; when it was the last, the kept bytes are
// written now. A failed write closes the connection, and the publishes it
// concerns are answered Lost by their confirm callbacks, so the error
// needs no other route.
func (hd *holding) release() {
	if hd.h != nil {
		_ = hd.h.Release(hd.ctx, hd.deadline)
		hd.h = nil
	}
}

// batchSlot is one member's answer, written by its confirm callback.
type batchSlot struct {
	cf      transport.Confirmation
	werr    error // the write failed part way (the member may have arrived)
	written bool
	done    bool
}

// batch collects the confirmations of one publishAll. Batches are reused
// with their slots, their per-slot callbacks (dones[i] is bound to slot i
// once, not per message), their signal channel and their timer. Owner
// rule: a batch is reused only when every written member has been
// answered, because the transport calls each callback exactly once and
// never after that; a batch left with answers outstanding (a timeout, a
// cancelled ctx) is left to the garbage collector.
type batch struct {
	mu        sync.Mutex
	slots     []batchSlot
	dones     []transport.ConfirmFunc
	pending   int
	sealed    bool // every member has been written; allDone may be signalled
	finalized bool
	allDone   chan struct{} // capacity 1: signalled once nothing is pending after sealing
	timer     *time.Timer
	p         *publishing
}

// getBatch returns an empty batch of n slots: the spare one, a pooled one
// or a new one.
func (p *publishing) getBatch(n int) *batch {
	b := p.spare.Swap(nil)
	if b == nil {
		b, _ = p.batches.Get().(*batch)
	}
	if b == nil {
		b = &batch{allDone: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
		b.timer.Stop()
	}
	if cap(b.slots) < n {
		b.slots = make([]batchSlot, n)
	}
	b.slots = b.slots[:n]
	for i := len(b.dones); i < n; i++ {
		b.dones = append(b.dones, b.confirmFunc(i))
	}
	b.p = p
	return b
}

// putBatch keeps b for the next publish; the caller has checked that
// nothing is pending and has read the slots. A batch of more than one
// slot becomes the spare; a single one goes to the pool.
func (p *publishing) putBatch(b *batch) {
	clear(b.slots)
	b.pending, b.sealed, b.finalized, b.p = 0, false, false, nil
	select {
	case <-b.allDone: // a signal no waiter took (it had timed out)
	default:
	}
	if cap(b.slots) > 1 {
		if old := p.spare.Swap(b); old != nil {
			p.batches.Put(old)
		}
		return
	}
	p.batches.Put(b)
}

func (b *batch) confirmFunc(i int) transport.ConfirmFunc {
	return func(cf transport.Confirmation) {
		b.p.permits.release()
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.finalized {
			return
		}
		b.slots[i].cf, b.slots[i].done = cf, true
		b.pending--
		if b.pending == 0 && b.sealed {
			b.signal()
		}
	}
}

func (b *batch) signal() {
	select {
	case b.allDone <- struct{}{}:
	default:
	}
}

// expect marks member i as about to be written.
func (b *batch) expect(i int) {
	b.mu.Lock()
	b.pending++
	b.slots[i].written = true
	b.mu.Unlock()
}

// brokerSaid reports whether err is the broker's own answer (a
// *transport.Error it sent), which says more than a failed write does.
func brokerSaid(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.Server
}

// writeFailed records that member i's write failed part way.
func (b *batch) writeFailed(i int, err error) {
	b.mu.Lock()
	b.slots[i].werr = err
	b.mu.Unlock()
}

// unexpect undoes expect for a member that was not written.
func (b *batch) unexpect(i int) {
	b.mu.Lock()
	b.pending--
	b.slots[i].written = false
	b.mu.Unlock()
}

// errConfirmTimeout is wait's answer when the confirm timeout passed; it
// is not context.DeadlineExceeded, which is what a caller's ctx whose
// deadline passed answers (a different outcome for the caller).
var errConfirmTimeout = errors.New("acemq: confirm timeout")

// wait seals the batch and waits for every written member's answer, at
// most d and until ctx ends. It returns nil, errConfirmTimeout for d, or
// ctx's error.
func (b *batch) wait(ctx context.Context, d time.Duration) error {
	b.mu.Lock()
	b.sealed = true
	if b.pending == 0 {
		b.signal()
	}
	b.mu.Unlock()
	select {
	case <-b.allDone:
		return nil
	default:
	}
	// The pooled timer is stopped (Go 1.23 timers: no stale tick).
	b.timer.Reset(d)
	defer b.timer.Stop()
	select {
	case <-b.allDone:
		return nil
	case <-b.timer.C:
		return errConfirmTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finalize stops the callbacks writing and returns the slots, and whether
// the batch may be reused (no callback can come any more).
func (b *batch) finalize() ([]batchSlot, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finalized = true
	return b.slots, b.pending == 0
}

// one holds a batch of one: Send's member and a hop's, pooled.
type one struct {
	prs  [1]prepared
	errs [1]error
}

var onePool = sync.Pool{New: func() any { return new(one) }}

func getOne() *one { return onePool.Get().(*one) }

// putOne returns o to the pool. The transport reads a member's message
// only during Publish (it copies or writes what it keeps), and nothing
// returned points into o.
func putOne(o *one) {
	*o = one{}
	onePool.Put(o)
}
