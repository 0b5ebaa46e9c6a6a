package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/rawpipe"
	"github.com/acemq-go/acemq/sqlstore"
)

// Relay defaults (spec §7.1).
const (
	DefaultInterval  = time.Second
	DefaultBatchSize = 100
	DefaultLockTTL   = 60 * time.Second
)

// ErrRunning is returned by Run on a relay that is already running or was
// closed.
var ErrRunning = errors.New("acemq: the outbox relay is already running or was closed; make a new relay")

// RelayOption configures a relay.
type RelayOption func(*relayConfig)

type relayConfig struct {
	interval       time.Duration
	batch          int
	lockTTL        time.Duration
	publishTimeout time.Duration
	id             string
	meter          metric.MeterProvider
	tracer         trace.TracerProvider
	notifier       Notifier
	observer       func(Sweep)
	logger         *slog.Logger
}

// WithInterval sets how often the relay sweeps without a wake-up (default
// 1s). It must be positive.
func WithInterval(d time.Duration) RelayOption { return func(c *relayConfig) { c.interval = d } }

// WithBatchSize sets how many records one sweep claims (default 100).
func WithBatchSize(n int) RelayOption { return func(c *relayConfig) { c.batch = n } }

// WithLockTTL sets how long a claim holds records against other relays
// (default 60s, renewed by every sweep). It must exceed the longest sweep.
func WithLockTTL(d time.Duration) RelayOption { return func(c *relayConfig) { c.lockTTL = d } }

// WithPublishTimeout bounds one sweep's publishing (the batch's writes and
// confirms), including waiting out a block or a recovery (default: the
// connection's confirm timeout). The lease bounds it too: a batch is
// written only while its claim is less than three quarters through
// WithLockTTL.
func WithPublishTimeout(d time.Duration) RelayOption {
	return func(c *relayConfig) { c.publishTimeout = d }
}

// WithRelayID names the relay in locked_by (≤ 64 characters; default
// host-pid-random).
func WithRelayID(id string) RelayOption { return func(c *relayConfig) { c.id = id } }

// WithMeterProvider records acemq.outbox.total and acemq.outbox.lag
// through mp (default: the Conn's, see acemq.Conn.MeterProvider).
func WithMeterProvider(mp metric.MeterProvider) RelayOption {
	return func(c *relayConfig) { c.meter = mp }
}

// WithTracerProvider makes the relay's spans with tp instead of the Conn's
// (acemq.Conn.TracerProvider): one "{destination} publish" span (PRODUCER)
// per record publish, carrying messaging.acemq.outbox_lag_ms when confirmed and the
// outbox.publish_failed event when it failed (see Relay).
func WithTracerProvider(tp trace.TracerProvider) RelayOption {
	return func(c *relayConfig) { c.tracer = tp }
}

// A Notifier wakes a relay when records may have been committed, so it
// publishes them without waiting for its next poll. Package
// outbox/pgnotify is the PostgreSQL one (LISTEN on NotifyChannel, which
// Add notifies); it lives in a package of its own so that a program using
// the outbox on SQLite or MySQL links no PostgreSQL driver.
type Notifier interface {
	// Listen subscribes, calls wake once subscribed (for anything
	// committed before) and again on every notification, until ctx ends
	// or the subscription fails; it returns the failure (ctx's error once
	// ctx ended). The relay calls it again a second after a failure,
	// polling meanwhile, so a broken notifier costs only latency; an
	// error wrapping errors.ErrUnsupported (wrong database) stops it
	// listening for good.
	Listen(ctx context.Context, wake func()) error
}

// WithNotifier wakes the relay through n (for example
// pgnotify.New(db) on PostgreSQL). Without one the relay polls every
// interval and wakes on Wake.
func WithNotifier(n Notifier) RelayOption { return func(c *relayConfig) { c.notifier = n } }

// WithObserver calls f after every sweep, on the relay's goroutine; f must
// not block.
func WithObserver(f func(Sweep)) RelayOption { return func(c *relayConfig) { c.observer = f } }

// WithLogger sets the relay's logger (default: the connection's).
func WithLogger(l *slog.Logger) RelayOption { return func(c *relayConfig) { c.logger = l } }

// Sweep reports one pass of a relay.
type Sweep struct {
	// Claimed is how many records the sweep claimed (0: nothing to do, or
	// another relay holds the outbox).
	Claimed int
	// Published counts records confirmed and deleted by this sweep. Run
	// deletes a batch that went through while it publishes the next one,
	// so a Run sweep's count is the batch before's records (and its own,
	// when nothing was claimed after it); the last batch's, deleted as Run
	// stops, come in one last observer call with Published alone.
	Published int
	// Failed counts records that spent an attempt (0 or 1).
	Failed int
	// Retired lists ids retired by this sweep.
	Retired []string
	// Err is why the sweep stopped early, nil when it went through its
	// batch. A sweep cut short because Run's context ended reports that
	// context's error (context.Canceled, say), whatever statement or
	// publish it interrupted, and the relay logs nothing about it.
	Err error
}

// Relay publishes what committed to an outbox Store. Make one with
// NewRelay, start it with Run; Wake and Close are safe for concurrent use.
//
// Each record's publish counts once in acemq.outbox.total{exchange,
// routing.key, outcome}: published, or failed (an unroutable or nacked
// record, a missing exchange, a timeout, a lost connection); a publish
// refused before anything was written (blocked broker, recovery) is not
// counted. A confirmed record also records acemq.outbox.lag: seconds from
// Store.Add (the time stored in created_at, taken before the caller's
// transaction commits, so the lag includes the rest of that transaction)
// to the broker's confirm. Each publish is traced as one "{destination} publish"
// span (PRODUCER; the exchange, or the routing key on the default
// exchange) with the contract's publish attributes (id, correlation,
// routing key, type) and messaging.acemq.outcome published, failed or
// refused; a published span carries messaging.acemq.outbox_lag_ms, a
// failed one is ERROR with the event outbox.publish_failed (the error as
// messaging.acemq.reason), a refused one is ERROR without the event. The
// span's parent is the trace context stored in the record's headers (Add
// stores the caller's, or a traceparent given with WithHeader), else the
// sweep's context; the
// stored headers are published unchanged, so the span's own context is
// not written into the message.
type Relay struct {
	conn  *acemq.Conn
	store *Store
	cfg   relayConfig
	log   *slog.Logger

	total  metric.Int64Counter
	lag    metric.Float64Histogram
	tracer trace.Tracer

	own    *owner
	pipe   rawpipe.Pipe // every batch goes out on it; Run's one after another on one channel
	wake   chan struct{}
	next   claimed  // the batch after the last sweep's, on the wire behind it or claimed (Run's goroutine only)
	later  claimed  // the batch claimed after next, not written yet (Run's goroutine only)
	behind []Record // the last sweep's confirmed batch, deleted by the next (Run's goroutine only)

	mu      sync.Mutex
	started bool
	stop    chan struct{}
	done    chan struct{}

	// held is the record the relay is held at by an outage (a refusal
	// about the broker's state), or nil; guarded by hmu (Health reads it).
	hmu  sync.Mutex
	held *heldAt

	// afterConfirm runs between the confirm and the delete (tests: a
	// crash there, or a failing delete).
	afterConfirm func(id string) error
	// beforeClaim runs before each claim a sweep's goroutine makes (tests:
	// a slow database, a relay stopping during the claim).
	beforeClaim func()
}

// NewRelay returns a relay publishing store's records through conn. It
// validates the options and touches neither the broker nor the database.
func NewRelay(conn *acemq.Conn, store *Store, opts ...RelayOption) (*Relay, error) {
	if conn == nil || store == nil {
		return nil, errors.New("acemq: outbox.NewRelay needs a connection and a store")
	}
	cfg := relayConfig{interval: DefaultInterval, batch: DefaultBatchSize, lockTTL: DefaultLockTTL}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.interval <= 0:
		return nil, &acemq.ConfigurationError{Option: "outbox.WithInterval", Reason: "the interval must be positive"}
	case cfg.batch <= 0:
		return nil, &acemq.ConfigurationError{Option: "outbox.WithBatchSize", Reason: "the batch size must be positive"}
	case cfg.lockTTL <= 0:
		return nil, &acemq.ConfigurationError{Option: "outbox.WithLockTTL", Reason: "the lock time must be positive"}
	case len(cfg.id) > 64:
		return nil, &acemq.ConfigurationError{Option: "outbox.WithRelayID", Reason: "the id must be at most 64 characters (the locked_by column)"}
	}
	if cfg.publishTimeout <= 0 {
		cfg.publishTimeout = conn.Config().ConfirmTimeout
		if cfg.publishTimeout <= 0 {
			cfg.publishTimeout = 30 * time.Second
		}
	}
	if cfg.id == "" {
		cfg.id = defaultRelayID()
	}
	if cfg.meter == nil {
		cfg.meter = conn.Config().MeterProvider
	}
	if cfg.tracer == nil {
		cfg.tracer = conn.Config().TracerProvider
	}
	log := cfg.logger
	if log == nil {
		log = conn.Config().Logger
	}
	meter := cfg.meter.Meter("org.acemq.amqp")
	total, err := meter.Int64Counter("acemq.outbox.total", metric.WithDescription("Outbox records published or failed by relays"))
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot create the acemq.outbox.total counter: %w", err)
	}
	lag, err := meter.Float64Histogram("acemq.outbox.lag", metric.WithUnit("s"), metric.WithDescription("Time from Store.Add (before the commit) to the broker's confirm of an outbox record"))
	if err != nil {
		return nil, fmt.Errorf("acemq: cannot create the acemq.outbox.lag histogram: %w", err)
	}
	return &Relay{
		conn: conn, store: store, cfg: cfg, log: log, total: total, lag: lag, tracer: cfg.tracer.Tracer(acemq.InstrumentationScope),
		own: store.owner(cfg.id, cfg.lockTTL), pipe: conn.RawPipe(), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// heldAt is the first record of the outbox that an outage keeps from
// going out: the broker refused it for a reason about its own state (a
// full queue that rejects publishes, no route yet, a missing exchange, a
// block, a lost connection). No attempt is spent; the relay tries again
// with back-off, publishing it alone before anything after it.
type heldAt struct {
	id    string
	seq   int64
	since time.Time
	tries int
	err   error
}

// holding records an outage at rec (err) and returns how many sweeps in a
// row it has now stopped there.
func (r *Relay) holding(rec Record, err error) int {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.held == nil || r.held.id != rec.ID {
		r.held = &heldAt{id: rec.ID, seq: rec.Seq, since: time.Now()}
	}
	r.held.tries++
	r.held.err = err
	return r.held.tries
}

// heldID returns the id of the record the relay is held at, or "".
func (r *Relay) heldID() string {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.held == nil {
		return ""
	}
	return r.held.id
}

// backoff is how long Run waits before sweeping again after sweeps that
// stopped at an outage tries times in a row: the interval, doubled each
// time, at most 32 intervals or 30 s (whichever is less, but never under
// the interval). Wake-ups do not cut it short.
func (r *Relay) backoff(tries int) time.Duration {
	limit := max(min(30*time.Second, 32*r.cfg.interval), r.cfg.interval)
	d := r.cfg.interval
	for i := 1; i < tries && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Held says why the relay cannot publish the first record of the outbox,
// or nil: the broker refused it for a reason about the broker's state, not
// the record (a full queue that rejects publishes, no queue bound for its
// routing key yet, a missing exchange, a block, a lost connection). The
// relay spends no attempt on it, tries again with back-off (the interval,
// doubling, at most 30 s), and publishes nothing after it until it went
// out, so no later record of the sequence overtakes it for good. Fix the
// broker (a consumer to drain the queue, the binding) or, if the record
// can never go, retire it with Store.Retire.
func (r *Relay) Held() error {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	h := r.held
	if h == nil {
		return nil
	}
	return fmt.Errorf("acemq: outbox relay %s is held at record %s (seq %d) since %s, %d tries: %w; no attempt is spent and the records after it wait",
		r.cfg.id, h.id, h.seq, h.since.UTC().Format(time.RFC3339), h.tries, h.err)
}

// Health reports UP while the relay publishes, and DEGRADED while an
// outage holds it at a record (Held says which and why). It answers from
// the relay's state, ignoring ctx. Safe for concurrent use.
func (r *Relay) Health(context.Context) acemq.HealthReport {
	rep := acemq.HealthReport{Status: acemq.StatusUp, CheckedAt: time.Now()}
	if err := r.Held(); err != nil {
		rep.Status, rep.Detail = acemq.StatusDegraded, err.Error()
	}
	return rep
}

// Check is the Check named outbox:{relay id} reporting Health, for
// acemq.CheckAll and the actuator.
func (r *Relay) Check() acemq.Check {
	return acemq.CheckFunc("outbox:"+r.cfg.id, r.Health)
}

func defaultRelayID() string {
	host, _ := os.Hostname()
	if len(host) > 32 {
		host = host[:32]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// ID returns the relay's name, as written in locked_by.
func (r *Relay) ID() string { return r.cfg.id }

// Wake asks for a sweep now. It never blocks; wake-ups coalesce.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run sweeps every interval and on every wake-up (Wake, or the notifier's)
// until ctx ends or Close is called, then releases the relay's locks and
// ends its database session. It returns nil after Close and ctx's error
// when ctx ended; ErrRunning if Run was already called. Sweep failures are
// logged and reported to the observer, never returned: the next sweep
// tries again.
//
// On PostgreSQL and MySQL a running relay holds one connection of the
// store's pool for itself (its session holds a lock named after the
// relay, which is how other relays know it is alive); give the pool room
// for it.
func (r *Relay) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return ErrRunning
	}
	r.started = true
	r.mu.Unlock()
	defer close(r.done)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs last: after cancel below stopped the listener
	defer cancel()
	if r.cfg.notifier != nil {
		wg.Add(1)
		go func() { defer wg.Done(); r.listenLoop(ctx) }()
	}
	defer func() {
		if len(r.next.recs) > 0 && r.next.out != nil {
			// The batch after is on the wire: wait for its confirms, and
			// delete it after the batch before when it went through whole.
			if r.settle(ctx, r.next) {
				r.behind = append(r.behind, r.next.recs...)
			}
			r.next = claimed{}
		}
		r.later = claimed{} // claimed, never written: unlock below lets it go
		if len(r.behind) > 0 {
			// The last batch confirmed: delete it before letting its locks go.
			n, err := r.deletePrefix(ctx, r.behind)
			r.behind = nil
			if r.cfg.observer != nil {
				r.cfg.observer(Sweep{Published: n, Err: err})
			}
		}
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer ucancel()
		if err := r.own.unlock(uctx); err != nil {
			r.log.Warn("acemq: the outbox relay could not release its locks; another relay takes them over once it sees this one gone", "relay", r.cfg.id, "error", err)
		}
		r.own.close()
	}()

	timer := time.NewTimer(0)
	defer timer.Stop()
	backingOff := false
	for {
		wake := r.wake
		if backingOff {
			wake = nil // an outage: new records do not cut the back-off short
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stop:
			return nil
		case <-timer.C:
		case <-wake:
		}
		sw := r.sweep(ctx, true)
		if r.cfg.observer != nil {
			r.cfg.observer(sw)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		next := r.cfg.interval
		backingOff = false
		if sw.Err == nil && (len(r.next.recs) > 0 || sw.Claimed == r.cfg.batch) {
			next = 0 // a batch claimed ahead, or a full batch: more may be waiting
		}
		r.hmu.Lock()
		if h := r.held; h != nil && sw.Err != nil {
			next, backingOff = r.backoff(h.tries), true
		}
		r.hmu.Unlock()
		timer.Reset(next)
	}
}

// Close stops Run and waits for it to return (or for ctx). It is safe to
// call more than once and on a relay that never ran; on a relay driven by
// SweepOnce alone it ends the relay's database session (without releasing
// its locks, which other relays then take over), and must not run
// concurrently with SweepOnce.
func (r *Relay) Close(ctx context.Context) error {
	r.mu.Lock()
	started := r.started
	r.started = true
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.mu.Unlock()
	if !started {
		r.own.close() // a relay driven by SweepOnce alone
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SweepOnce claims one batch and publishes it in sequence order as one
// pipeline: every record is written on one channel with the confirms
// outstanding together, writing stops once a failure is known, and the
// confirmed prefix (the records before the first failure) is deleted in one
// statement. The first failed record spends an attempt when the failure is
// about the record; records after it stay stored and go out again after it
// (see "Publishing and order" in the package doc). The batch is written
// only while the claim is less than three quarters through its lease (read
// from the clock before every write), and the delete removes only records
// the relay still holds, so a relay that was frozen past its lease
// publishes and deletes nothing another relay has taken over. Run calls it; it is exported for
// tools and tests that drive a relay by hand. It must not run concurrently
// with itself or with Close on the same relay.
func (r *Relay) SweepOnce(ctx context.Context) Sweep { return r.sweep(ctx, false) }

// claimed is a batch claimed ahead, while the batch before it was being
// published, and when its claim was made (its lease runs from then), or
// why the claim failed; and, when it was written already (Run's
// pipeline), its publish in flight.
type claimed struct {
	recs []Record
	at   time.Time
	err  error
	out  *inFlight
}

// following is what a Run sweep's goroutine did while the sweep's batch
// was on the wire: the batch after it (written behind it, or claimed
// only), the batch claimed after that one (not written: the next sweep
// writes it), and how many records of the batch before were deleted, and
// why not all of them.
type following struct {
	after, then claimed
	deleted     int
	delErr      error
}

// inFlight is a batch written on the relay's pipe, its confirms
// outstanding.
type inFlight struct {
	batch  rawpipe.Batch
	spans  []publishSpan
	ctx    context.Context // the batch's deadline: its lease and the publish timeout
	cancel context.CancelFunc
}

// sweep is SweepOnce. With ahead (Run's sweeps) a sweep keeps the
// database work off the broker's path. At most two batches are on the
// wire, on one channel (the relay's pipe), so the broker routes them in
// seq order: the sweep's own batch N, whose confirms it waits for, and
// batch N+1 right behind it. N+1 was claimed by the sweep before, while N
// was on the wire, and the sweep writes it as it starts; meanwhile its
// goroutine claims batch N+2 (the first records but those on the wire or
// waiting to be deleted, so a record that committed late with a lower seq
// is not passed over) and deletes batch N−1, which went through (on
// PostgreSQL in the claim's own transaction), and the next sweep writes
// N+2 once N is confirmed. When no batch was claimed ahead (the outbox is
// not full), the goroutine claims N+1 and writes it behind N at once, and
// when that batch is full it claims N+2 too. So a claim has a batch's
// confirm time to run in, and records committed meanwhile go out without
// waiting for one.
//
// A batch is written only while no failure of the batch before it is
// known, on the same terms as any batch (its lease, read from when it was
// claimed; stopping at the first failure), and not at all when a record
// of either batch failed before (attempts > 0: such a batch is published
// as publishRuns does, with nothing after it on the wire). A batch's
// confirmed records are deleted only once every record before them was:
// when the delete of the batch before fails (or finds records taken
// over), nothing of this batch is deleted and nothing more is claimed, so
// its records go out again after the batch before's and last copies stay
// in seq order. A sweep that failed waits for the confirms of the batch
// written after its own and drops it and the batch claimed after it
// (their records stay locked by this relay, which claims them again from
// the start).
func (r *Relay) sweep(ctx context.Context, ahead bool) Sweep {
	sw := r.sweepBatch(ctx, ahead)
	if sw.Err == nil {
		r.hmu.Lock()
		r.held = nil // the record it was held at went out (or was retired)
		r.hmu.Unlock()
	}
	return sw
}

// sweepBatch is sweep's work (see sweep).
func (r *Relay) sweepBatch(ctx context.Context, ahead bool) Sweep {
	var sw Sweep
	start := time.Now()
	recs, at, out := r.next.recs, r.next.at, r.next.out
	later := r.later
	behind := r.behind
	r.next, r.later, r.behind = claimed{}, claimed{}, nil
	if out == nil && (recs == nil || start.Sub(at) > r.cfg.lockTTL/4) {
		later = claimed{} // claimed after a batch that was not written: claimed again below
		if len(behind) > 0 {
			// Nothing on the wire to hide the delete behind; and the claim
			// below would take these records again.
			n, err := r.deletePrefix(ctx, behind)
			sw.Published += n
			if err != nil {
				sw.Err = err
				return sw
			}
			behind = nil
		}
		var err error
		at = start
		if recs, _, err = r.own.claim(ctx, r.cfg.batch, nil, nil); err != nil {
			sw.Err = r.stopped(ctx, err, "acemq: the outbox relay could not claim records; it tries again at the next sweep")
			return sw
		}
	}
	sw.Claimed = len(recs)
	if len(recs) == 0 {
		return sw
	}
	if out == nil {
		if err := ctx.Err(); err != nil {
			if len(behind) > 0 {
				n, _ := r.deletePrefix(ctx, behind)
				sw.Published += n
			}
			sw.Err = err
			return sw
		}
		if ahead {
			out = r.write(ctx, recs, at, start, nil)
		}
	}
	if len(later.recs) > 0 && out != nil && !out.batch.Failed() && start.Sub(later.at) <= r.cfg.lockTTL/4 {
		// Claimed by the sweep before: on the wire behind this batch now.
		later.out = r.write(ctx, later.recs, later.at, start, out.batch)
	}
	if later.out == nil {
		later = claimed{} // not written: its records are claimed again below
	}
	var next chan following
	if ahead || len(behind) > 0 {
		// The relay's session is used here alone until next is received:
		// the publish below touches only the broker.
		next = make(chan following, 1)
		skip := make([]int64, 0, len(behind)+len(recs)+len(later.recs))
		for _, batch := range [][]Record{behind, recs, later.recs} {
			for _, rec := range batch {
				skip = append(skip, rec.Seq)
			}
		}
		go func() { next <- r.ahead(ctx, ahead, out, later, behind, skip) }()
	}
	var errs []error
	var spans []publishSpan
	if out != nil {
		errs = out.batch.Wait(out.ctx)
		out.cancel()
		spans = out.spans
	} else {
		var msgs []rawpipe.Message
		msgs, spans = r.outgoing(ctx, recs)
		pctx, cancel := context.WithDeadline(ctx, r.publishDeadline(at, start))
		errs = r.publishRuns(pctx, recs, msgs)
		cancel()
	}
	confirmed := r.store.now()
	var f following
	if next != nil {
		f = <-next
	}
	sw.Published += f.deleted
	first := len(recs)
	for i, err := range errs {
		if err != nil {
			first = i
			break
		}
	}
	for i, rec := range recs {
		if i != first {
			r.account(ctx, rec, spans[i], errs[i], confirmed)
		}
	}
	if f.delErr != nil {
		// The batch before is still stored (or partly another relay's):
		// delete nothing after it, and publish the batches claimed after
		// it again from the first record.
		if f.after.out != nil {
			r.settle(ctx, f.after)
		}
		if first < len(recs) {
			r.failed(ctx, recs[first], spans[first], errs[first], &sw) //nolint:errcheck // the delete's failure is the sweep's
		}
		sw.Err = f.delErr
		return sw
	}
	if first == len(recs) && len(f.after.recs) > 0 {
		// The next sweep deletes this batch while the next is on the wire.
		r.behind, r.next, r.later = recs, f.after, f.then
		if f.then.err != nil {
			r.stopped(ctx, f.then.err, "acemq: the outbox relay could not claim a batch ahead; it claims it again at the next sweep")
		}
		return sw
	}
	if f.after.out != nil {
		// Written after this batch, whose failure was not known yet: its
		// records may be on the queue ahead of the failed one, and all of
		// them go out again after it.
		r.settle(ctx, f.after)
	}
	if first > 0 {
		n, err := r.deletePrefix(ctx, recs[:first])
		sw.Published += n
		if err != nil {
			sw.Err = err
			return sw
		}
	}
	if first < len(recs) {
		sw.Err = r.failed(ctx, recs[first], spans[first], errs[first], &sw)
		return sw
	}
	if err := cmp.Or(f.after.err, f.then.err); err != nil {
		// The batch went through; the next sweep claims again.
		r.stopped(ctx, err, "acemq: the outbox relay could not claim its next batch ahead; it claims it again at the next sweep")
	}
	return sw
}

// ahead is the database side of a Run sweep (see sweep), on a goroutine of
// its own while the sweep's batch (out) is on the wire: with claiming
// (Run) it claims the batch after later (the batch written behind out as
// the sweep started), or, when there is none, the batch after out, which
// it writes behind out at once, and the batch after that one too when it
// was full; and it deletes behind, the batch before out, which went
// through. On PostgreSQL the first claim deletes behind in its own
// transaction; elsewhere behind is deleted last, after the writes.
func (r *Relay) ahead(ctx context.Context, claiming bool, out *inFlight, later claimed, behind []Record, skip []int64) following {
	f := following{after: later}
	merge := r.store.dialect == sqlstore.PostgreSQL && len(behind) > 0 // the first claim deletes behind
	deleted := false
	claim := func(skip []int64) claimed {
		c := claimed{at: time.Now()}
		var done []int64
		if merge {
			merge, deleted = false, true
			done = make([]int64, len(behind))
			for i, rec := range behind {
				done[i] = rec.Seq
			}
			if r.afterConfirm != nil {
				if err := r.afterConfirm(behind[0].ID); err != nil {
					f.deleted, f.delErr = r.marked(behind, 0, err)
					return claimed{}
				}
			}
		}
		if r.beforeClaim != nil {
			r.beforeClaim()
		}
		cctx := ctx
		if done != nil {
			// The statement deletes records already published.
			var cancel context.CancelFunc
			cctx, cancel = finishing(ctx)
			defer cancel()
		}
		recs, n, err := r.own.claim(cctx, r.cfg.batch, skip, done)
		if done != nil {
			f.deleted, f.delErr = r.marked(behind, n, err)
			if f.delErr != nil {
				return claimed{}
			}
		}
		c.recs, c.err = recs, err
		return c
	}
	switch {
	case !claiming:
	case later.recs != nil:
		f.then = claim(skip)
	default:
		f.after = claim(skip)
		if f.after.err == nil && len(f.after.recs) > 0 && out != nil && !out.batch.Failed() {
			f.after.out = r.write(ctx, f.after.recs, f.after.at, f.after.at, out.batch)
			if f.after.out != nil && len(f.after.recs) == r.cfg.batch && f.delErr == nil {
				for _, rec := range f.after.recs {
					skip = append(skip, rec.Seq)
				}
				f.then = claim(skip)
			}
		}
	}
	if len(behind) > 0 && !deleted {
		f.deleted, f.delErr = r.deletePrefix(ctx, behind)
	}
	return f
}

// write writes recs on the relay's pipe after the batch after (nil: none
// outstanding) and returns it in flight; nil when a record of recs failed
// before (those batches go out by publishRuns,
// with nothing written after them until they are confirmed). The writes
// stop at the claim's lease (three quarters of WithLockTTL from at) and
// at start plus the publish timeout, and the wait for the confirms too.
func (r *Relay) write(ctx context.Context, recs []Record, at, start time.Time, after rawpipe.Batch) *inFlight {
	held := r.heldID()
	for _, rec := range recs {
		if rec.Attempts > 0 || rec.ID == held {
			return nil
		}
	}
	msgs, spans := r.outgoing(ctx, recs)
	pctx, cancel := context.WithDeadline(ctx, r.publishDeadline(at, start))
	return &inFlight{batch: r.pipe.Write(pctx, msgs, after), spans: spans, ctx: pctx, cancel: cancel}
}

// outgoing starts a span per record and builds its message: the stored
// bytes and headers unchanged (behaviour §7.1).
func (r *Relay) outgoing(ctx context.Context, recs []Record) ([]rawpipe.Message, []publishSpan) {
	msgs := make([]rawpipe.Message, len(recs))
	spans := make([]publishSpan, len(recs))
	for i, rec := range recs {
		spans[i] = r.startSpan(ctx, rec)
		msgs[i] = rawpipe.Message{
			Exchange:    rec.Exchange,
			RoutingKey:  rec.RoutingKey,
			ContentType: rec.ContentType,
			MessageID:   rec.ID,
			Headers:     rec.Headers,
			Body:        rec.Body,
		}
	}
	return msgs, spans
}

// publishDeadline is when a batch claimed at and swept from start stops
// being written and waited for: three quarters of the lease, or the
// publish timeout, whichever comes first.
func (r *Relay) publishDeadline(at, start time.Time) time.Time {
	return earliest(at.Add(r.cfg.lockTTL*3/4), start.Add(r.cfg.publishTimeout))
}

// settle waits for the confirms of a batch in flight that will not be
// deleted by a sweep (the sweep before it failed, or Run is stopping),
// counts and ends its spans, and reports whether every record of it was
// confirmed. It waits within the batch's own deadline, or up to 5s more
// once ctx ended (Run stopping), so that its spans and counts are right.
func (r *Relay) settle(ctx context.Context, c claimed) bool {
	wctx := c.out.ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	errs := c.out.batch.Wait(wctx)
	c.out.cancel()
	confirmed := r.store.now()
	all := true
	for i, rec := range c.recs {
		r.account(ctx, rec, c.out.spans[i], errs[i], confirmed)
		all = all && errs[i] == nil
	}
	return all
}

// stopped returns err, or ctx's error when ctx ended (the relay is
// stopping: its cancelled statements are no failure), and logs msg with
// err only in the first case.
func (r *Relay) stopped(ctx context.Context, err error, msg string) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	r.log.Warn(msg, "relay", r.cfg.id, "error", err)
	return err
}

// errNotWritten marks a record after a failed run: never written.
var errNotWritten = errors.New("acemq: an earlier record of the batch failed before this one was written; nothing was sent")

// publishRuns publishes the batch as pipelined runs, one after another,
// each written on the relay's pipe behind nothing and confirmed before the
// next (as Conn.PublishRawBatch does), stopping at the first failure. A
// record that failed before (attempts > 0, or the record an outage holds
// the relay at) is a run of its own, published and confirmed before
// anything after it is written: a record that keeps failing then puts
// later records on the wire ahead of it at most once, the first time it
// fails.
func (r *Relay) publishRuns(ctx context.Context, recs []Record, msgs []rawpipe.Message) []error {
	errs := make([]error, len(msgs))
	held := r.heldID()
	alone := func(rec Record) bool { return rec.Attempts > 0 || rec.ID == held }
	for from := 0; from < len(msgs); {
		to := from + 1
		if !alone(recs[from]) {
			for to < len(msgs) && !alone(recs[to]) {
				to++
			}
		}
		copy(errs[from:to], r.pipe.Write(ctx, msgs[from:to], nil).Wait(ctx))
		for i := from; i < to; i++ {
			if errs[i] != nil {
				for j := to; j < len(msgs); j++ {
					errs[j] = errNotWritten
				}
				return errs
			}
		}
		from = to
	}
	return errs
}

// account counts and ends the span of one record's publish (every record
// but the first failed one, which failed handles).
func (r *Relay) account(ctx context.Context, rec Record, span publishSpan, err error, confirmed time.Time) {
	if err == nil {
		lag := max(confirmed.Sub(rec.CreatedAt), 0)
		r.count(ctx, rec, outcomePublished)
		r.lag.Record(ctx, lag.Seconds(), metric.WithAttributes(attribute.String("exchange", rec.Exchange), attribute.String("routing.key", rec.RoutingKey)))
		span.published(lag)
		return
	}
	var pe *acemq.PublishError
	if err == errNotWritten || acemq.IsPaused(err) || (errors.As(err, &pe) && !pe.Sent) {
		span.failed(outcomeRefused, err)
		return
	}
	r.count(ctx, rec, outcomeFailed)
	span.failed(outcomeFailed, err)
}

func (r *Relay) count(ctx context.Context, rec Record, outcome string) {
	r.total.Add(ctx, 1, metric.WithAttributes(attribute.String("exchange", rec.Exchange), attribute.String("routing.key", rec.RoutingKey), attribute.String("outcome", outcome)))
}

// deletePrefix deletes confirmed records in one fenced statement and
// returns how many it deleted; an error when it could not delete them all
// (logged). It may run on a goroutine of its own, with the relay's
// session to itself.
func (r *Relay) deletePrefix(ctx context.Context, recs []Record) (int, error) {
	ids := make([]any, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ID
	}
	if r.afterConfirm != nil {
		if err := r.afterConfirm(recs[0].ID); err != nil {
			return r.marked(recs, 0, err)
		}
	}
	dctx, dcancel := finishing(ctx)
	defer dcancel()
	n, err := r.own.published(dctx, ids)
	return r.marked(recs, n, err)
}

// finishing is the context of a statement that records what was already
// published (a delete of confirmed records, a failed attempt): it runs to
// its end when ctx ends because the relay is stopping — cut short, those
// records would go out again — within 10 s.
func finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// marked reports the delete of the confirmed records recs, of which n
// were deleted (or err): how many, and an error (logged) unless all of
// them were.
func (r *Relay) marked(recs []Record, n int64, err error) (int, error) {
	if err != nil {
		e := fmt.Errorf("acemq: %d outbox records from %s were published but not marked, so they will be sent again: %w", len(recs), recs[0].ID, err)
		r.log.Error(e.Error(), "relay", r.cfg.id, "id", recs[0].ID)
		return 0, e
	}
	if int(n) != len(recs) {
		e := fmt.Errorf("acemq: the outbox relay lost its claim on %d of the %d records it published (another relay took them over after its lease ran out or its database session ended); it deleted only its own, and the other relay sends the rest again", len(recs)-int(n), len(recs))
		r.log.Warn(e.Error(), "relay", r.cfg.id)
		return int(n), e
	}
	return int(n), nil
}

// failed handles the batch's first failed record: a failure about the
// record (unroutable, nacked, missing exchange, a header over the Go
// client's limits) spends an attempt, any
// other is not the record's fault. It returns the failure, which ends the
// sweep.
func (r *Relay) failed(ctx context.Context, rec Record, span publishSpan, err error, sw *Sweep) error {
	if aboutTheRecord(err) {
		r.count(ctx, rec, outcomeFailed)
		span.failed(outcomeFailed, err)
		sw.Failed++
		fctx, fcancel := finishing(ctx)
		held, ferr := r.own.failed(fctx, rec.ID, describe(err))
		fcancel()
		switch {
		case ferr != nil:
			r.log.Error("acemq: the outbox relay could not record a failed attempt", "relay", r.cfg.id, "id", rec.ID, "error", ferr)
		case !held:
			sw.Failed--
		case rec.Attempts+1 >= MaxAttempts:
			sw.Retired = append(sw.Retired, rec.ID)
			r.log.Error("acemq: outbox record retired after the maximum attempts; list it with Store.Retired and put it back with Store.Release", "relay", r.cfg.id, "id", rec.ID, "attempts", MaxAttempts, "error", err)
		}
		r.log.Warn("acemq: outbox.publish_failed", "relay", r.cfg.id, "id", rec.ID, "attempt", rec.Attempts+1, "error", err)
		return err
	}
	// Nacked, unroutable, a missing exchange, refused, lost, timed out,
	// past the lease: the broker's state, not the record's fault. No
	// attempt spent; the relay is held here and tries again with back-off.
	r.account(ctx, rec, span, err, time.Time{})
	if cerr := ctx.Err(); cerr != nil {
		return cerr // the relay is stopping
	}
	tries := r.holding(rec, err)
	fctx, fcancel := finishing(ctx)
	if nerr := r.own.noted(fctx, rec.ID, describe(err)); nerr != nil {
		r.log.Debug("acemq: the outbox relay could not note why a record is held", "relay", r.cfg.id, "id", rec.ID, "error", nerr)
	}
	fcancel()
	r.log.Warn("acemq: the outbox relay is held at a record the broker refused for a reason of its own; no attempt was spent, it tries again with back-off and publishes nothing after it meanwhile", "relay", r.cfg.id, "id", rec.ID, "tries", tries, "error", err)
	return err
}

// describe renders err with its cause when the text leaves the cause out
// (a PublishError's sentence does not quote the broker's 404).
func describe(err error) string {
	s := err.Error()
	if u := errors.Unwrap(err); u != nil && !strings.Contains(s, u.Error()) {
		s += " (" + u.Error() + ")"
	}
	return s
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// listenLoop runs the notifier, listening again a second after a failure.
// Polling carries on meanwhile, so a broken notifier only costs latency.
func (r *Relay) listenLoop(ctx context.Context) {
	backoff := time.NewTimer(0)
	defer backoff.Stop()
	<-backoff.C
	for {
		err := r.cfg.notifier.Listen(ctx, r.Wake)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errors.ErrUnsupported) {
			r.log.Warn("acemq: the outbox relay's notifier cannot work here; the relay polls", "relay", r.cfg.id, "error", err)
			return
		}
		r.log.Warn("acemq: the outbox relay's notifier stopped; polling continues and it listens again shortly", "relay", r.cfg.id, "error", err)
		backoff.Reset(time.Second)
		select {
		case <-ctx.Done():
			return
		case <-backoff.C:
		}
	}
}

// aboutTheRecord reports whether a publish failed because of the record
// itself, which no change on the broker's side would let through: a header
// over the Go client's limits or frame_max, or a body over the maximum
// message size. A nack (a full queue that rejects publishes), an
// unroutable return (no queue bound yet) and a missing exchange (404) are
// about the broker's state: an outage, which the relay waits out.
func aboutTheRecord(err error) bool {
	return errors.Is(err, acemq.ErrHeaderLimit) || errors.Is(err, acemq.ErrMessageTooLarge)
}
