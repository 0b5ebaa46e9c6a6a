// Package stream reads RabbitMQ streams (and memory:// streams) as
// retained logs: each reader starts at a position it names, sees every
// message with its offset, and keeps its own place. Acknowledging removes
// nothing; several readers read the same stream independently.
//
// A reader always sends an explicit x-stream-offset (next by default),
// uses prefetch 10 and its name as the consumer tag. Decisions follow
// contract §3.11: Accept advances; Reject and Park copy the message to
// {stream}.dlq / {stream}.parked and advance. Retry and InProgress are not
// allowed on a stream (a retry would append a copy), so they, and a panic,
// are failures handled by the reader's FailurePolicy: Park (default), Stop
// or Skip. The Conn's retry policy never applies.
//
// A message set aside counts as handled once its copy is made; when the
// copy cannot be made the reader holds at it (Held, Health DEGRADED),
// reading nothing after it, and tries again until it can. After a recovery
// the reader resumes at the offset after the newest one it handled, so
// nothing is skipped.
//
// Checkpoint saves the reader's place in a CheckpointStore (MemoryCheckpoints,
// or SQLCheckpoints on SQLite, PostgreSQL or MySQL) so a reader started again
// resumes after it; a checkpoint never moves backwards, and a reader started
// with the name of one still running takes the name over (the other stops). Lag, ProbeLag and the acemq.stream.lag gauges say how far
// behind the stream's end a reader is; Health and Check report a reader the
// Stop policy halted as degraded. Probe reads a stream's oldest and newest
// offsets.
//
// The manual's page on streams: https://github.com/acemq-go/acemq/blob/main/docs/streams.md
package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// Position is where a reader starts. The zero value is Next.
type Position struct {
	value any           // nil: next
	since time.Duration // > 0: "the last d", resolved when Read starts
	desc  string
}

// First starts at the oldest message the stream retains.
func First() Position { return Position{value: "first", desc: "first"} }

// Last starts at the newest chunk (on RabbitMQ a chunk may hold several
// messages, so a few before the newest may come too).
func Last() Position { return Position{value: "last", desc: "last"} }

// Next starts with the next message published (the default).
func Next() Position { return Position{value: "next", desc: "next"} }

// Offset starts at offset n, or the oldest retained message if n is gone.
func Offset(n int64) Position { return Position{value: n, desc: fmt.Sprint(n)} }

// At starts at the chunk holding time t (whole seconds on the wire), so a
// few messages stored just before t may come too.
func At(t time.Time) Position {
	return Position{value: t.UTC().Truncate(time.Second), desc: t.UTC().Format(time.RFC3339)}
}

// Since starts at the messages of the last d, sent as the timestamp
// now − d when Read starts.
func Since(d time.Duration) Position { return Position{since: d, desc: "the last " + d.String()} }

// String names the position as given.
func (p Position) String() string {
	if p.desc == "" {
		return "next"
	}
	return p.desc
}

// FailurePolicy says what a reader does when its handler asks for a retry
// or an in-progress delay, or panics.
type FailurePolicy int

const (
	// Park copies the message to {stream}.parked with the reason and
	// moves on (the default, contract §3.11).
	Park FailurePolicy = iota
	// Stop halts the reader at the failing offset: nothing after it is
	// handled, Err reports the failure (health degraded) and Close returns
	// it.
	Stop
	// Skip counts the message (Skipped) and moves on.
	Skip
)

// Message is one stream message: the engine's message and its offset.
type Message[T any] struct {
	*acemq.Message[T]
	// Offset is the message's position in the stream.
	Offset int64
}

// Handler handles one stream message and returns Accept, Reject or Park.
type Handler[T any] func(ctx context.Context, m *Message[T]) acemq.Decision

// Option configures a reader.
type Option func(*config)

type config struct {
	from       Position
	prefetch   int
	policy     FailurePolicy
	codec      acemq.Codec
	checkpoint *checkpointing
	lagEvery   time.Duration
	heldEvery  time.Duration // how often a held reader tries again (tests lengthen it)
}

// defaultHeldEvery is how often a reader held at a message it could not
// set aside subscribes again to try.
const defaultHeldEvery = 5 * time.Second

// From sets where the reader starts (Next when not given).
func From(p Position) Option { return func(c *config) { c.from = p } }

// Prefetch sets how many messages the broker sends ahead (10 when not
// given). It must be at least 1: RabbitMQ refuses a stream consumer
// without one.
func Prefetch(n int) Option { return func(c *config) { c.prefetch = n } }

// OnFailure sets the failure policy (Park when not given).
func OnFailure(p FailurePolicy) Option { return func(c *config) { c.policy = p } }

// WithCodec decodes payloads with codec instead of the Conn's.
func WithCodec(codec acemq.Codec) Option { return func(c *config) { c.codec = codec } }

// Reader reads one stream. Its methods are safe for concurrent use.
type Reader struct {
	stream, name string
	conn         *acemq.Conn

	mu       sync.Mutex
	start    any   // the x-stream-offset of the first subscribe
	handled  int64 // newest offset accepted, skipped or set aside (or before one); -1 none
	skipped  int
	stopErr  error
	consumer *acemq.Consumer
	closing  bool
	closed   bool           // Close ran (the checkpoint goroutines are stopped)
	wg       sync.WaitGroup // the goroutines that close the consumer on Stop and hold the reader
	lag      lagState

	// aside is the message handed to the engine to set aside, not yet
	// counted as handled: its copy is made once the engine takes the next
	// delivery without reporting a failure (OnSetAsideFailed).
	aside     asideAt
	held      *heldAt // the message the reader waits at, or nil
	heldKick  chan struct{}
	quit      chan struct{} // closed by Close
	subscribe func(ctx context.Context) (*acemq.Consumer, error)
	heldEvery time.Duration

	saver      *saver  // nil without Checkpoint
	prober     *prober // nil when LagProbe(0)
	unregister func()  // the lag gauges
}

// asideAt is a message being set aside: its offset (-1: none), the
// decision that sets it aside, and when it was first published.
type asideAt struct {
	offset    int64
	dec       acemq.Decision
	firstSeen time.Time
}

// heldAt is a message the reader could neither handle nor set aside: it
// stays there, reading nothing after it, until the copy can be made.
type heldAt struct {
	offset   int64
	target   string
	err      error
	dec      *acemq.Decision // the decision that sets it aside, given again (nil: the engine's own, say for an unreadable message)
	since    time.Time
	tries    int
	retrying bool // subscribed again: the message comes back to be set aside
}

// Read starts a reader named name on stream, handling every message with
// h, one at a time in offset order. The stream must exist. Read declares
// {stream}.dlq and {stream}.parked as any consumer does. With Checkpoint
// it first loads the reader's checkpoint and, when there is one, starts
// at the offset after it instead of From. It fails when the options are
// invalid, the checkpoint cannot be loaded or the subscribe is refused.
func Read[T any](ctx context.Context, c *acemq.Conn, stream, name string, h Handler[T], opts ...Option) (*Reader, error) {
	cfg := config{prefetch: 10, lagEvery: 10 * time.Second, heldEvery: defaultHeldEvery}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case h == nil:
		return nil, errors.New("acemq: stream reader: the handler is nil; pass a function that handles a *stream.Message")
	case name == "":
		return nil, errors.New("acemq: stream reader: the name is empty; name the reader (it is the consumer tag)")
	case cfg.prefetch < 1:
		return nil, fmt.Errorf("acemq: stream reader %q: prefetch %d is below 1; RabbitMQ refuses a stream consumer without a prefetch, use 10", name, cfg.prefetch)
	case cfg.policy < Park || cfg.policy > Skip:
		return nil, fmt.Errorf("acemq: stream reader %q: unknown failure policy %d; use stream.Park, stream.Stop or stream.Skip", name, cfg.policy)
	case cfg.from.since < 0:
		return nil, fmt.Errorf("acemq: stream reader %q: Since(%v) is negative; give how far back to start", name, cfg.from.since)
	case cfg.checkpoint != nil && cfg.checkpoint.store == nil:
		return nil, fmt.Errorf("acemq: stream reader %q: Checkpoint was given a nil store; pass a stream.CheckpointStore (&stream.MemoryCheckpoints{} or stream.NewSQLCheckpoints)", name)
	case cfg.lagEvery < 0:
		return nil, fmt.Errorf("acemq: stream reader %q: LagProbe(%v) is negative; pass 0 to never probe", name, cfg.lagEvery)
	}
	r := &Reader{stream: stream, name: name, conn: c, handled: -1, start: cfg.from.value, lag: lagState{end: -1},
		aside: asideAt{offset: -1}, heldKick: make(chan struct{}, 1), quit: make(chan struct{}), heldEvery: cfg.heldEvery}
	if cfg.from.since > 0 {
		r.start = time.Now().Add(-cfg.from.since).UTC().Truncate(time.Second)
	}
	if r.start == nil {
		r.start = "next"
	}
	if cp := cfg.checkpoint; cp != nil {
		var (
			saved  int64
			ok     bool
			err    error
			holder string
		)
		if f, fenced := cp.store.(FencedCheckpointStore); fenced {
			holder = name + "/" + randomHex(8)
			saved, ok, err = f.Claim(ctx, stream, name, holder)
		} else {
			saved, ok, err = cp.store.Load(ctx, stream, name)
		}
		if err != nil {
			return nil, fmt.Errorf("acemq: cannot start stream reader %q on %q: its checkpoint could not be loaded: %w", name, stream, err)
		}
		if !ok {
			saved = -1
		} else {
			r.start = saved + 1
		}
		r.saver = newSaver(r, *cp, saved, holder)
	}
	copts := acemq.ConsumerConfig{Tag: name, Prefetch: cfg.prefetch, Concurrency: 1, Retry: acemq.NoRetry(), ArgsAt: r.args, OnStream: true,
		OnSetAsideFailed: r.asideFailed}
	if cfg.codec != nil {
		copts.Codec = cfg.codec
	}
	r.subscribe = func(ctx context.Context) (*acemq.Consumer, error) {
		return acemq.Consume(ctx, c, stream, func(ctx context.Context, m *acemq.Message[T]) acemq.Decision {
			return handle(r, ctx, m, h, cfg.policy)
		}, copts)
	}
	k, err := r.subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot start stream reader %q on %q from %s: %w", name, stream, cfg.from, err)
	}
	r.wg.Add(1)
	go r.holding()
	r.unregister = r.lagMetrics(c)
	if r.saver != nil {
		go r.saver.run()
	}
	if cfg.lagEvery > 0 {
		r.prober = r.startProber(cfg.lagEvery)
	}
	r.mu.Lock()
	r.consumer = k
	stopped := r.stopErr != nil
	r.mu.Unlock()
	if stopped {
		r.stopConsumer()
	}
	return r, nil
}

// args is the x-stream-offset for each subscribe: where the reader
// started, then the offset after the newest one handled.
func (r *Reader) args() transport.Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handled >= 0 {
		return transport.Table{"x-stream-offset": r.handled + 1}
	}
	return transport.Table{"x-stream-offset": r.start}
}

func offsetOf(env acemq.Envelope) (int64, bool) {
	v, ok := env.Header("x-stream-offset")
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// handle runs h on one delivery and turns its decision into what a
// stream allows.
func handle[T any](r *Reader, ctx context.Context, m *acemq.Message[T], h Handler[T], policy FailurePolicy) acemq.Decision {
	off, ok := offsetOf(m.Envelope)
	if !ok {
		// Only a stream stamps x-stream-offset: this is not one.
		return acemq.Park(fmt.Errorf("acemq: stream reader %q: the message carries no x-stream-offset header; is %q a stream?", r.name, r.stream))
	}
	r.seen(off)
	r.mu.Lock()
	r.passAside(off)
	stopped, seen := r.stopErr != nil, off <= r.handled
	hd := r.held
	var again *acemq.Decision
	if hd != nil && hd.retrying && off == hd.offset {
		again = hd.dec
	}
	if stopped || seen || (hd != nil && (!hd.retrying || off > hd.offset)) {
		// An ack on a stream only returns credit; the position stays.
		r.mu.Unlock()
		return acemq.Accept()
	}
	r.mu.Unlock()
	if again != nil {
		// The handler decided already: set it aside again without
		// running it twice.
		r.setAside(off, *again, m.Envelope.FirstSeen)
		return *again
	}
	dec, failure := run(ctx, h, &Message[T]{Message: m, Offset: off})
	if failure == nil {
		switch dec.String() {
		case "accept":
			r.advance(off, false, m.Envelope.FirstSeen)
			return dec
		case "reject", "park":
			// Counted as handled once the engine has made the copy (see
			// passAside); if it cannot, the reader waits here.
			r.setAside(off, dec, m.Envelope.FirstSeen)
			return dec
		default:
			failure = fmt.Errorf("acemq: stream reader %q asked for %s at offset %d, which a stream does not allow (contract §3.11: a retry would append a copy): %v", r.name, dec, off, dec.Err())
		}
	}
	switch policy {
	case Skip:
		r.advance(off, true, m.Envelope.FirstSeen)
		return acemq.Accept()
	case Stop:
		r.mu.Lock()
		r.stopErr = fmt.Errorf("acemq: stream reader %q on %q stopped at offset %d: %w; fix the cause and start a reader at stream.Offset(%d)", r.name, r.stream, off, failure, off)
		r.mu.Unlock()
		r.stopConsumer()
		return acemq.Accept()
	default:
		d := acemq.Park(failure)
		r.setAside(off, d, m.Envelope.FirstSeen)
		return d
	}
}

// setAside notes the message at off handed to the engine to be copied
// aside by dec.
func (r *Reader) setAside(off int64, dec acemq.Decision, firstSeen time.Time) {
	r.mu.Lock()
	r.aside = asideAt{offset: off, dec: dec, firstSeen: firstSeen}
	r.mu.Unlock()
}

// passAside counts the message set aside before off as handled: the
// engine settles one delivery at a time and reports a failed copy
// (asideFailed) before it takes the next, so its copy was made unless the
// reader is held at it. It also lets go of a held message that was set
// aside at last. r.mu is held.
func (r *Reader) passAside(off int64) {
	a := r.aside
	if a.offset < 0 || a.offset >= off || (r.held != nil && !r.held.retrying) {
		return
	}
	if r.held != nil && r.held.offset == a.offset {
		r.held = nil // the copy was made this time
	}
	r.aside = asideAt{offset: -1}
	if a.offset > r.handled {
		r.handled = a.offset
		r.lag.firstSeen = a.firstSeen
		if r.saver != nil {
			r.saver.handled() // takes only the saver's lock, never r.mu
		}
	}
}

// asideFailed is the engine's report (ConsumerConfig.OnSetAsideFailed)
// that a message's copy to {stream}.dlq or {stream}.parked could not be
// made: the reader holds at it, reading nothing after it, and subscribes
// again every while to set it aside once more (see holding).
func (r *Reader) asideFailed(f acemq.Fallback) {
	off, ok := offsetOf(f.Envelope)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	hd := r.held
	if hd == nil || hd.offset != off {
		hd = &heldAt{offset: off, since: time.Now()}
	}
	hd.target, hd.err, hd.retrying = f.Target, f.Err, false
	hd.tries++
	if r.aside.offset == off {
		dec := r.aside.dec
		hd.dec = &dec
	}
	r.held, r.aside = hd, asideAt{offset: -1}
	select {
	case r.heldKick <- struct{}{}:
	default:
	}
}

// holding is the reader's goroutine for a held message, until Close: it
// closes the consumer (which would read on past the message), and every
// heldEvery subscribes again from the offset after the newest handled,
// so the message comes back and is set aside again; a failure holds it
// again.
func (r *Reader) holding() {
	defer r.wg.Done()
	for {
		select {
		case <-r.quit:
			return
		case <-r.heldKick:
		}
		r.mu.Lock()
		k := r.consumer
		r.consumer = nil
		r.mu.Unlock()
		if k != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = k.Close(ctx)
			cancel()
		}
		for {
			t := time.NewTimer(r.heldEvery)
			select {
			case <-r.quit:
				t.Stop()
				return
			case <-r.heldKick: // tests: try now
				t.Stop()
			case <-t.C:
			}
			r.mu.Lock()
			if r.closing || r.stopErr != nil {
				r.mu.Unlock()
				return
			}
			if r.held != nil {
				r.held.retrying = true
			}
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			k, err := r.subscribe(ctx)
			cancel()
			r.mu.Lock()
			if err == nil && !r.closing {
				r.consumer = k
				r.mu.Unlock()
				break
			}
			closing := r.closing
			if err != nil && r.held != nil {
				r.held.retrying = false
				r.held.err = fmt.Errorf("cannot subscribe again to try: %w (the copy failed with: %v)", err, r.held.err)
			}
			r.mu.Unlock()
			if closing {
				if k != nil {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_ = k.Close(ctx)
					cancel()
				}
				return
			}
		}
	}
}

// Held says why the reader waits at a message it could neither handle
// nor set aside (its copy to {stream}.dlq or {stream}.parked failed: the
// queue is gone, a resource alarm outlasted the copy's bound), and nil
// while it is not. The reader reads nothing after that message, and
// neither Handled nor the checkpoint moves past it, until the copy is
// made: it subscribes again every 5 s to try, declaring the queues it sets
// aside to as any consumer does at start. Health reports DEGRADED
// meanwhile.
func (r *Reader) Held() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	hd := r.held
	if hd == nil {
		return nil
	}
	return fmt.Errorf("acemq: stream reader %q on %q is held at offset %d since %s (%d tries): its copy to %s could not be made: %w; it reads nothing after it until the copy is made, subscribing again every %v to try (check that %s exists and the broker takes publishes)",
		r.name, r.stream, hd.offset, hd.since.UTC().Format(time.RFC3339), hd.tries, hd.target, hd.err, r.heldEvery, hd.target)
}

// run calls h, turning a panic into a failure.
func run[T any](ctx context.Context, h Handler[T], m *Message[T]) (dec acemq.Decision, failure error) {
	defer func() {
		if p := recover(); p != nil {
			failure = fmt.Errorf("acemq: the handler panicked on message %s at offset %d: %v", shownID(m.Envelope.ID), m.Offset, p)
		}
	}()
	return h(ctx, m), nil
}

func (r *Reader) advance(off int64, skipped bool, firstSeen time.Time) {
	r.mu.Lock()
	if r.aside.offset >= 0 && r.aside.offset <= off {
		r.aside = asideAt{offset: -1}
	}
	if off > r.handled {
		r.handled = off
		r.lag.firstSeen = firstSeen
	}
	if skipped {
		r.skipped++
	}
	r.mu.Unlock()
	if r.saver != nil {
		r.saver.handled()
	}
}

// overtaken stops the reader: another reader of the same name claimed
// the checkpoint (err is ErrCheckpointTaken).
func (r *Reader) overtaken(err error) {
	r.mu.Lock()
	if r.stopErr == nil {
		r.stopErr = fmt.Errorf("acemq: stream reader %q on %q stopped after offset %d: %w", r.name, r.stream, r.handled, err)
	}
	r.mu.Unlock()
	r.stopConsumer()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stopConsumer closes the consumer from a goroutine the reader owns (a
// handler cannot wait for its own consumer to drain).
func (r *Reader) stopConsumer() {
	r.mu.Lock()
	k := r.consumer
	if k == nil || r.closing {
		r.mu.Unlock()
		return
	}
	r.closing = true
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = k.Close(ctx)
	}()
}

// Name is the reader's name, also its consumer tag.
func (r *Reader) Name() string { return r.name }

// Handled returns the newest offset the reader has accepted or skipped,
// or set aside (rejected or parked: counted once the next message comes,
// when its copy is known to be made). ok is false before the first.
func (r *Reader) Handled() (offset int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled, r.handled >= 0
}

// Skipped counts messages the Skip policy passed over.
func (r *Reader) Skipped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// Err is nil while the reader is healthy, and says where and why it stopped
// under the Stop policy (report health as degraded while it is non-nil).
func (r *Reader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopErr
}

// Close stops the reader, waiting for the message in hand up to ctx's
// deadline, then saves its checkpoint (with Checkpoint). It returns the
// Stop policy's error when the reader stopped, else the consumer's close
// error and the final save's error, joined. Calling it again returns the
// same kind of answer without saving twice.
func (r *Reader) Close(ctx context.Context) error {
	r.mu.Lock()
	k, already := r.consumer, r.closing
	r.closing = true
	first := !r.closed
	r.closed = true
	if first {
		close(r.quit)
	}
	r.mu.Unlock()
	var err error
	if !already && k != nil {
		err = k.Close(ctx)
	}
	r.wg.Wait()
	if first {
		if r.prober != nil {
			r.prober.close(ctx)
		}
		if r.unregister != nil {
			r.unregister()
		}
		if r.saver != nil {
			err = errors.Join(err, r.saver.close(ctx))
		}
	}
	if e := r.Err(); e != nil {
		return e
	}
	return err
}

// Arg is the x-stream-offset consume argument for p: "first", "last",
// "next", an int64 offset, or a time (whole seconds); Since resolves to
// now − d when Arg is called. For code that subscribes to a stream itself
// (the command's stream tail does).
func (p Position) Arg() any {
	switch {
	case p.since > 0:
		return time.Now().Add(-p.since).UTC().Truncate(time.Second)
	case p.value == nil:
		return "next"
	}
	return p.value
}

// ParsePosition reads a position as an operator writes it: first, last,
// next, an offset (0 or more), a time in RFC 3339 (2026-12-01T10:00:00Z)
// or a duration meaning "the last d" (90m, 2h). It fails with the forms
// it accepts.
func ParsePosition(s string) (Position, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "first":
		return First(), nil
	case "last":
		return Last(), nil
	case "next", "":
		return Next(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Position{}, fmt.Errorf("acemq: stream position %q is a negative offset; offsets start at 0", s)
		}
		return Offset(n), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return At(t), nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil && d > 0 {
		return Since(d), nil
	}
	return Position{}, fmt.Errorf("acemq: cannot read stream position %q; use first, last, next, an offset (42), a time (2026-12-01T10:00:00Z) or how far back (90m)", s)
}

// shownID is id as an error or log line shows it: whole up to 64 bytes,
// else its first 64 (cut back to whole UTF-8 characters) and its length,
// so a publisher's 60,000-byte id does not make a 60 KB line. It is the
// root module's internal/idtext.Short, which a module of its own does not
// import.
func shownID(id string) string {
	if len(id) <= 64 {
		return id
	}
	return strings.ToValidUTF8(id[:64], "") + "… (" + strconv.Itoa(len(id)) + " bytes)"
}
