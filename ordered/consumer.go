package ordered

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/idtext"
)

// DefaultPrefetch is each partition consumer's prefetch (behaviour §7.10).
const DefaultPrefetch = 20

// DefaultRetryInPlaceDelay is the wait between attempts of RetryInPlace
// when none is given.
const DefaultRetryInPlaceDelay = time.Second

// Policy is what a partition does with a message its handler failed
// (behaviour §7.10). A failure is a Retry decision (unless its error is
// marked acemq.Fatal), an InProgress decision, the zero Decision or a
// panic. Reject and Park, and a fatal Retry, are the handler's own
// answers and are carried out as usual (.dlq or .parked, then the
// partition continues). No policy ever takes the retry ladder:
// republishing to the back of the queue would break the order.
type Policy int

const (
	// Stop halts the partition at the failed message (the default): the
	// message stays unacked at the head, nothing behind it in the
	// partition runs, and Health reports degraded naming the partition,
	// the message and the failure. The message goes back to the broker
	// when the consumer closes (or its connection is lost) and runs again
	// at the next start; a success in the partition clears the stop.
	//
	// Close holds the message until its drain deadline (ctx's, or the
	// drain timeout) and then hands it back, and says which partitions
	// were stopped in its error.
	//
	// Known limit (measured): the message goes back by basic.nack with
	// requeue, and RabbitMQ 3.10's quorum queues put a message handed back
	// that way behind the messages waiting in the queue, so at the next
	// start the held message can run after its successors (the test sees
	// this about half the time). Stop keeps the order within a run, loses
	// nothing and dead-letters nothing; across a Close it can reorder the
	// held message. The in-process broker puts it back at the head.
	Stop Policy = iota
	// RetryInPlace waits and runs the handler again on the same message,
	// for as long as it takes: the message never leaves the head. Closing
	// the consumer hands it back to the broker unsettled.
	RetryInPlace
	// Skip dead-letters the failed message to {partition}.dlq with the
	// failure as its reason and continues with the next one.
	Skip
)

// String names the policy: stop, retry_in_place, skip.
func (p Policy) String() string {
	switch p {
	case Stop:
		return "stop"
	case RetryInPlace:
		return "retry_in_place"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ConsumerOption configures Consume.
type ConsumerOption func(*consumerConfig)

type consumerConfig struct {
	partitions int
	prefetch   int
	policy     Policy
	retryDelay time.Duration
	extra      acemq.ConsumerConfig
}

// Partitions sets how many partitions the stream has (default
// DefaultPartitions); it must match the Topology and every Send.
func Partitions(n int) ConsumerOption { return func(c *consumerConfig) { c.partitions = n } }

// Prefetch sets each partition consumer's prefetch (default 20, ≥ 1).
func Prefetch(n int) ConsumerOption { return func(c *consumerConfig) { c.prefetch = n } }

// OnFailure sets the failure policy (default Stop).
func OnFailure(p Policy) ConsumerOption { return func(c *consumerConfig) { c.policy = p } }

// RetryInPlaceDelay sets the wait between attempts under RetryInPlace
// (default DefaultRetryInPlaceDelay, must be > 0).
func RetryInPlaceDelay(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.retryDelay = d }
}

// WithConsumerOptions passes settings to every partition's acemq consumer
// (codec, interceptors, drain timeout, tag …). Prefetch, concurrency,
// retry and SingleActive are the ordered consumer's own and are
// overridden: concurrency is always 1, which is what keeps a partition's
// order, and SingleActive is always set, which keeps it across a graceful
// handover (see Consume).
func WithConsumerOptions(cfg acemq.ConsumerConfig) ConsumerOption {
	return func(c *consumerConfig) { c.extra = cfg }
}

// Consumer consumes every partition of an ordered stream, one acemq
// consumer (one channel, concurrency 1) per partition queue, so each
// partition, and with it each key, is handled in order while partitions
// run in parallel. Its methods are safe for concurrent use.
type Consumer struct {
	name      string
	policy    Policy
	members   []*acemq.Consumer
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	stopped map[int]Stopped
}

// Stopped describes a partition halted by the Stop policy.
type Stopped struct {
	Partition int
	Queue     string
	// MessageID is the envelope id of the message it halted at.
	MessageID string
	Err       error
	Since     time.Time
}

// Consume starts one consumer per partition of the ordered stream name
// (queues name.p0 … must exist: apply Topology first) running h. Each
// partition runs one message at a time, in queue order; failures follow
// the policy (OnFailure). It returns once every partition's subscription
// is live; if one cannot start, those started are closed and the error
// says which partition failed. A bad option is an
// *acemq.ConfigurationError and starts nothing.
//
// Every partition consumer is an acemq consumer with
// acemq.ConsumerConfig.SingleActive: its Close lets the message in hand
// finish, starts nothing more and closes the channel without a cancel, so
// on queues declared with SingleActiveConsumer the instance that takes
// over gets the unsettled messages back in order, before anything newer.
func Consume[T any](ctx context.Context, c *acemq.Conn, name string, h acemq.Handler[T], opts ...ConsumerOption) (*Consumer, error) {
	cfg := consumerConfig{partitions: DefaultPartitions, prefetch: DefaultPrefetch, policy: Stop, retryDelay: DefaultRetryInPlaceDelay}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case h == nil:
		return nil, &acemq.ConfigurationError{Option: "handler", Reason: "the handler is nil; pass the function that handles each message"}
	case cfg.partitions < 1:
		return nil, partitionsError(cfg.partitions)
	case cfg.prefetch < 1:
		return nil, &acemq.ConfigurationError{Option: "Prefetch", Reason: fmt.Sprintf("prefetch %d is below 1; give 1 or more (default %d)", cfg.prefetch, DefaultPrefetch)}
	case cfg.policy < Stop || cfg.policy > Skip:
		return nil, &acemq.ConfigurationError{Option: "OnFailure", Reason: fmt.Sprintf("unknown failure policy %d; use Stop, RetryInPlace or Skip", int(cfg.policy))}
	case cfg.retryDelay <= 0:
		return nil, &acemq.ConfigurationError{Option: "RetryInPlaceDelay", Reason: fmt.Sprintf("the delay %v is not positive; give the wait between attempts", cfg.retryDelay)}
	}
	k := &Consumer{name: name, policy: cfg.policy, closing: make(chan struct{}), stopped: map[int]Stopped{}}
	for p := range cfg.partitions {
		o := cfg.extra
		o.Prefetch, o.Concurrency, o.Retry = cfg.prefetch, 1, acemq.NoRetry()
		// Close hands over in the partition's order: the subscription
		// ends by closing its channel, so a single-active-consumer peer
		// gets what this one held before anything newer. On a partition
		// queue without the argument it only keeps the prefetched messages
		// until the one in hand is settled, which order wants anyway.
		o.SingleActive = true
		m, err := acemq.Consume(ctx, c, Queue(name, p), partitionHandler(k, p, cfg, h), o)
		if err != nil {
			serr := fmt.Errorf("acemq: cannot start the ordered consumer of %q at partition %d of %d: %w", name, p, cfg.partitions, err)
			k.closeOnce.Do(func() { close(k.closing) })
			if cerr := closeAll(context.WithoutCancel(ctx), k.members); cerr != nil {
				return nil, errors.Join(serr, cerr)
			}
			return nil, serr
		}
		k.members = append(k.members, m)
	}
	return k, nil
}

// partitionHandler wraps h with the failure policy for partition p.
func partitionHandler[T any](k *Consumer, p int, cfg consumerConfig, h acemq.Handler[T]) acemq.Handler[T] {
	return func(ctx context.Context, m *acemq.Message[T]) acemq.Decision {
		for attempt := 0; ; attempt++ {
			// A message a worker has started is in hand: it runs even while
			// the consumer closes (the drain leaves what no worker started
			// to its channel close, which returns it in order). A retry
			// does not start once closing: the Release it returns instead
			// is left unsettled by the drain for that same close, never
			// rejected while the subscription stands.
			if attempt > 0 {
				select {
				case <-k.closing:
					return acemq.Release()
				default:
				}
			}
			dec, failure := run(ctx, h, m)
			if failure == nil {
				k.clearStop(p)
				return dec
			}
			switch cfg.policy {
			case Skip:
				return acemq.Reject(fmt.Errorf("the ordered consumer skipped it (policy skip): %w", failure))
			case RetryInPlace:
				t := time.NewTimer(cfg.retryDelay)
				select {
				case <-t.C:
					continue
				case <-ctx.Done():
				case <-k.closing:
					<-ctx.Done() // hold the head until the drain lets go of it
				}
				t.Stop()
				return acemq.Release()
			default: // Stop
				k.setStop(Stopped{Partition: p, Queue: m.Queue, MessageID: m.Envelope.ID, Err: failure, Since: time.Now()})
				// Held unacked until the drain deadline or the channel's end;
				// then it goes back with the drain's channel close, ahead of
				// the rest of the partition.
				<-ctx.Done()
				return acemq.Release()
			}
		}
	}
}

// run calls h and says whether its answer is a failure the policy handles.
func run[T any](ctx context.Context, h acemq.Handler[T], m *acemq.Message[T]) (dec acemq.Decision, failure error) {
	defer func() {
		if r := recover(); r != nil {
			failure = fmt.Errorf("acemq: the handler panicked on message %s: %v", idtext.Short(m.Envelope.ID), r)
		}
	}()
	dec = h(ctx, m)
	switch dec.String() {
	case "accept", "reject", "park", "release":
		return dec, nil
	case "retry":
		if acemq.IsFatal(dec.Err()) {
			return acemq.Reject(dec.Err()), nil
		}
		if dec.Err() == nil {
			return dec, errors.New("the handler asked for a retry without a reason")
		}
		return dec, dec.Err()
	case "in_progress":
		return dec, errors.New("the handler answered in progress, which would put the message behind the rest of its partition")
	}
	return dec, errors.New("the handler returned no decision")
}

func (k *Consumer) setStop(s Stopped) {
	k.mu.Lock()
	k.stopped[s.Partition] = s
	k.mu.Unlock()
}

func (k *Consumer) clearStop(p int) {
	k.mu.Lock()
	delete(k.stopped, p)
	k.mu.Unlock()
}

// Name is the ordered stream consumed.
func (k *Consumer) Name() string { return k.name }

// Partitions returns the partition consumers, partition 0 first. The slice
// is a copy.
func (k *Consumer) Partitions() []*acemq.Consumer {
	return append([]*acemq.Consumer(nil), k.members...)
}

// Stopped lists the partitions the Stop policy halted, by partition.
func (k *Consumer) Stopped() []Stopped {
	k.mu.Lock()
	out := make([]Stopped, 0, len(k.stopped))
	for _, s := range k.stopped {
		out = append(out, s)
	}
	k.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// Health reports UP while every partition runs, DEGRADED while one is
// halted by the Stop policy (Detail names each partition, message and
// failure, and what to do) or a partition consumer is stalled.
func (k *Consumer) Health(ctx context.Context) acemq.HealthReport {
	r := acemq.HealthReport{Status: acemq.StatusUp, CheckedAt: time.Now()}
	var lines []string
	for _, s := range k.Stopped() {
		lines = append(lines, fmt.Sprintf("partition %s is stopped at message %s since %s: %v; fix the cause, then restart the consumer (the message runs again)", s.Queue, idtext.Short(s.MessageID), s.Since.UTC().Format(time.RFC3339), s.Err))
	}
	for _, m := range k.members {
		if err := m.Stalled(); err != nil {
			lines = append(lines, fmt.Sprintf("partition %s is not reading: %v", m.Queue(), err))
		}
	}
	if len(lines) > 0 {
		r.Status = acemq.StatusDegraded
		r.Detail = "acemq: ordered consumer " + k.name + ": " + strings.Join(lines, "; ")
	}
	return r
}

// Check is the Check named ordered:{name} reporting Health, for
// acemq.CheckAll and the actuator.
func (k *Consumer) Check() acemq.Check {
	return acemq.CheckFunc("ordered:"+k.name, k.Health)
}

// Close drains every partition under one deadline (ctx's, or the
// consumers' drain timeout), joining their errors. A message held by Stop
// or RetryInPlace is held until that deadline and then goes back to the
// broker unsettled, so Close of a stopped consumer takes the whole
// deadline and its error names each stopped partition and message.
// Idempotent: later calls return the first result.
func (k *Consumer) Close(ctx context.Context) error {
	k.closeOnce.Do(func() {
		close(k.closing)
		stopped := k.Stopped()
		err := closeAll(ctx, k.members)
		for _, s := range stopped {
			err = errors.Join(err, fmt.Errorf("acemq: ordered consumer %s closed with partition %s stopped at message %s: %w; the message went back to its queue and runs again at the next start", k.name, s.Queue, idtext.Short(s.MessageID), s.Err))
		}
		k.closeErr = err
	})
	return k.closeErr
}

func closeAll(ctx context.Context, ms []*acemq.Consumer) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
