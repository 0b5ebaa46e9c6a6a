package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
	"github.com/acemq-go/acemq/idempotency"
	"github.com/acemq-go/acemq/outbox"
	"github.com/acemq-go/acemq/rpc"
)

type demoOrder struct {
	ID    string `json:"id"`
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

type priceRequest struct {
	SKU string `json:"sku"`
}

type priceReply struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

var (
	errWarehouseTimeout = errors.New("the warehouse did not answer in time")
	errUnknownSKU       = errors.New("the catalogue has no such product")
)

func newDemo() *cobra.Command {
	var u, db string
	var timeout time.Duration
	var withConsole bool
	var cf consoleFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the narrated order flow: outbox, relay, idempotency, retry, dead-letter and replay, request/reply",
		Long: `Run a narrated, timed order flow and check its numbers.

An order service asks pricing for each price (request/reply, package rpc) and
records each order and its OrderPlaced event in one database transaction
(package outbox); the relay publishes them; a payment consumer charges once
although a message arrives twice after a simulated crash before its ack
(idempotency.Transactional); a flaky inventory consumer (idempotency.Guard)
succeeds on its third attempt (retry with back-off); a poison order is
dead-lettered with its reason and replayed after a fix (package replay); one
order's timeline is rebuilt from its correlation id.

It ends with a summary table and exits 0 only if every number is what the
flow implies (lost = 0), so it doubles as a smoke test. Without flags it needs
nothing installed: the in-process broker (memory://demo) and SQLite.`,
		Example: `  acemq demo
  acemq demo --url amqp://guest:guest@localhost:5672/ --db postgres://user@localhost:5432/db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var then func(*acemq.Conn) error
			if withConsole {
				// The console outlives the demo's timeout: it runs until Ctrl-C.
				then = func(c *acemq.Conn) error {
					return demoConsole(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c, u, cf)
				}
			}
			err := runDemo(ctx, cmd.OutOrStdout(), u, db, then)
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("the demo did not finish within %v (%s); check that the broker and database answer, or raise --timeout", timeout, sentence(err))
			}
			if err != nil && !strings.Contains(err.Error(), ";") {
				err = fmt.Errorf("%s; check that the broker and the database answer, then run the demo again", strings.TrimSuffix(sentence(err), "."))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&u, "url", "memory://demo", "broker URL (memory://name or amqp://user:pass@host:port/)")
	cmd.Flags().StringVar(&db, "db", "", "database: postgres://… (default: SQLite in a temporary file)")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long")
	cmd.Flags().BoolVar(&withConsole, "console", false, "afterwards, keep the broker up with a few dead letters and serve the dead-letter console until Ctrl-C")
	cf.register(cmd)
	return cmd
}

// demoCounts are the settlements the consumers reported, by queue and outcome.
type demoCounts struct {
	mu      sync.Mutex
	byQueue map[string]map[acemq.Outcome]int
	changed chan struct{}
}

func (d *demoCounts) add(queue string, outcome acemq.Outcome) {
	d.mu.Lock()
	if d.byQueue[queue] == nil {
		d.byQueue[queue] = map[acemq.Outcome]int{}
	}
	d.byQueue[queue][outcome]++
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *demoCounts) get(queue string, outcomes ...acemq.Outcome) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for o, c := range d.byQueue[queue] {
		if len(outcomes) == 0 {
			n += c
		}
		for _, want := range outcomes {
			if o == want {
				n += c
			}
		}
	}
	return n
}

// waitUntil returns once cond holds, re-checking whenever a settlement is
// reported, or fails when ctx ends.
func (d *demoCounts) waitUntil(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-d.changed:
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		}
	}
	return nil
}

// runDemo runs the flow; then, when set, runs after a successful summary
// while the demo's connections are still open (acemq demo --console).
func runDemo(ctx context.Context, out io.Writer, url, dbURL string, then func(*acemq.Conn) error) error {
	start := time.Now()
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	section := func(title string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, "\n— %s\n", title)
	}
	j := &journal{start: start}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	run := hex.EncodeToString(b)
	suffix := ""
	if !isMemory(url) {
		suffix = "." + run // a shared broker: this run's names are its own
	}
	ex, payQ, invQ, priceQ := "demo.orders"+suffix, "demo.payments"+suffix, "demo.inventory"+suffix, "demo.prices"+suffix

	section("setting up")
	db, err := openDemoDB(ctx, dbURL, run)
	if err != nil {
		return err
	}
	defer db.close()
	say("database: %s (%s); tables orders, payments, reservations, acemq_outbox, acemq_idempotency", db.kind, db.where)

	counts := &demoCounts{byQueue: map[string]map[acemq.Outcome]int{}, changed: make(chan struct{}, 1)}
	hook := func(s acemq.Settlement) {
		counts.add(s.Queue, s.Outcome)
		switch s.Outcome {
		case acemq.ConsumeRetried:
			j.add(s.Envelope.CorrelationID, "%s: attempt %d failed, retry in %v", s.Queue, s.Envelope.Attempt, s.RetryDelay.Round(time.Millisecond))
		case acemq.ConsumeRejected, acemq.ConsumeDeadLettered, acemq.ConsumeParked:
			j.add(s.Envelope.CorrelationID, "%s: set aside to %s: %s", s.Queue, s.Target, s.Reason)
		}
	}
	orders, err := connect(ctx, url, "acemq-demo-orders")
	if err != nil {
		return err
	}
	defer closeConn(orders)
	services, err := connect(ctx, url, "acemq-demo-services", acemq.Config{OnSettlement: hook})
	if err != nil {
		return err
	}
	defer closeConn(services)
	say("broker: %s (%s)", redact.URL(url), orders.Health(ctx).Transport)

	topo := acemq.NewTopology().
		Exchange(ex, acemq.Topic, acemq.ExchangeOptions{}).
		Queue(payQ, acemq.QueueOptions{}).DeadLetters(payQ).Bind(payQ, ex, "order.placed").
		Queue(invQ, acemq.QueueOptions{}).DeadLetters(invQ).Bind(invQ, ex, "order.placed").
		Queue(priceQ, acemq.QueueOptions{})
	if err := orders.Apply(ctx, topo); err != nil {
		return fmt.Errorf("cannot declare the demo's topology (%s); check the broker", sentence(err))
	}
	if suffix != "" {
		defer cleanupDemo(services, ex, payQ, invQ, priceQ)
	}
	say("topology: exchange %s (topic) → %s and %s (quorum, dead-lettering to .dlq/.parked), %s", ex, payQ, invQ, priceQ)

	// Pricing answers requests; the order service asks before recording.
	prices := map[string]int{"SKU-42": 1999, "SKU-7": 4250, "SKU-99": 899}
	pricing, err := rpc.Respond(ctx, services, priceQ, func(_ context.Context, m *acemq.Message[priceRequest]) (priceReply, error) {
		return priceReply{SKU: m.Payload.SKU, Cents: prices[m.Payload.SKU]}, nil
	}, acemq.ConsumerConfig{})
	if err != nil {
		return fmt.Errorf("cannot start the pricing responder (%s)", sentence(err))
	}
	defer func() { _ = pricing.Close(context.Background()) }()
	req, err := rpc.NewRequester(ctx, orders, rpc.WithTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("cannot start the price requester (%s)", sentence(err))
	}
	defer func() { _ = req.Close(context.Background()) }()

	var duplicates, answered atomic.Int64
	var fixed, crashed atomic.Bool
	startConsumers := func() error {
		// Payments: the charge and the message id commit in one transaction
		// (idempotency.Transactional); a delivery of an id already recorded
		// is accepted without charging again.
		charge := idempotency.Transactional(db.DB, db.dialect, func(ctx context.Context, tx *sql.Tx, m *acemq.Message[demoOrder]) acemq.Decision {
			o := m.Payload
			*ctx.Value(ranKey{}).(*bool) = true
			if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO payments (order_id, cents) VALUES (?, ?)`), o.ID, o.Cents); err != nil {
				return acemq.Retry(err)
			}
			say("payments:  charged %s %d.%02d", o.ID, o.Cents/100, o.Cents%100)
			j.add(m.Envelope.CorrelationID, "payments: charged %d cents", o.Cents)
			return acemq.Accept()
		}, idempotency.WithKey(func(m *acemq.Message[demoOrder]) string { return "payments:" + m.Envelope.ID }))
		paymentPolicy := acemq.Exponential(3, 100*time.Millisecond, time.Second)
		_, err := acemq.Consume(ctx, services, payQ, func(ctx context.Context, m *acemq.Message[demoOrder]) acemq.Decision {
			o := m.Payload
			j.add(m.Envelope.CorrelationID, "payments: received %s (attempt %d)", m.Envelope.ID[:8], m.Envelope.Attempt)
			ran := false
			dec := charge(context.WithValue(ctx, ranKey{}, &ran), m)
			accepted := dec.String() == "accept"
			switch {
			case accepted && !ran:
				duplicates.Add(1)
				say("payments:  %s arrived again (same message id %s): already charged, not charged twice", o.ID, m.Envelope.ID[:8])
				j.add(m.Envelope.CorrelationID, "payments: duplicate of %s recognised, not charged again", m.Envelope.ID[:8])
			case accepted && o.ID == "o-1" && crashed.CompareAndSwap(false, true):
				// The charge has committed; the service "dies" before its
				// ack, so the broker delivers the message again.
				say("payments:  the service crashed after charging %s and before its ack (simulated): the broker will deliver it again", o.ID)
				j.add(m.Envelope.CorrelationID, "payments: crashed before the ack (simulated)")
				return acemq.Retry(errors.New("simulated crash after the charge committed, before the ack"))
			}
			return dec
		}, acemq.ConsumerConfig{Retry: paymentPolicy})
		if err != nil {
			return fmt.Errorf("cannot start the payment consumer (%s)", sentence(err))
		}

		// Inventory: a lease guard (idempotency.Guard over the SQL store);
		// flaky for one order, and does not know SKU-99 until the fix.
		guardStore, err := idempotency.NewSQLStore(db.DB, db.dialect)
		if err != nil {
			return err
		}
		policy := acemq.Exponential(5, 200*time.Millisecond, 2*time.Second)
		reserve := idempotency.Guard(guardStore, func(ctx context.Context, m *acemq.Message[demoOrder]) acemq.Decision {
			o := m.Payload
			if o.ID == "o-2" && m.Envelope.Attempt < 3 {
				err := fmt.Errorf("%w (attempt %d)", errWarehouseTimeout, m.Envelope.Attempt)
				say("inventory: %s not reserved, %v: retry with back-off", o.ID, err)
				return acemq.Retry(err)
			}
			if o.SKU == "SKU-99" && !fixed.Load() {
				err := fmt.Errorf("order %s names %s: %w", o.ID, o.SKU, errUnknownSKU)
				say("inventory: %s is poison (%v): reject", o.ID, err)
				return acemq.Reject(err)
			}
			if _, err := db.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO reservations (order_id, sku) VALUES (?, ?)`), o.ID, o.SKU); err != nil {
				return acemq.Retry(err)
			}
			say("inventory: reserved %s for %s (attempt %d)", o.SKU, o.ID, m.Envelope.Attempt)
			j.add(m.Envelope.CorrelationID, "inventory: reserved %s (attempt %d)", o.SKU, m.Envelope.Attempt)
			return acemq.Accept()
		}, idempotency.WithKey(func(m *acemq.Message[demoOrder]) string { return "inventory:" + m.Envelope.ID }))
		_, err = acemq.Consume(ctx, services, invQ, func(ctx context.Context, m *acemq.Message[demoOrder]) acemq.Decision {
			j.add(m.Envelope.CorrelationID, "inventory: received %s (attempt %d)", m.Envelope.ID[:8], m.Envelope.Attempt)
			return reserve(ctx, m)
		}, acemq.ConsumerConfig{Retry: policy})
		if err != nil {
			return fmt.Errorf("cannot start the inventory consumer (%s)", sentence(err))
		}
		say("consumers: payments (idempotency.Transactional, retry %s) and inventory (idempotency.Guard, retry %s) start reading", paymentPolicy, policy)
		return nil
	}

	section("1. the order service records orders (request/reply for prices, outbox for events)")
	placed := []demoOrder{{ID: "o-1", SKU: "SKU-42"}, {ID: "o-2", SKU: "SKU-7"}, {ID: "o-3", SKU: "SKU-99"}}
	corrOf := map[string]string{}
	var recorded []acemq.Envelope
	for i := range placed {
		o := &placed[i]
		t0 := time.Now()
		p, err := rpc.Request[priceRequest, priceReply](ctx, req, "", priceQ, priceRequest{SKU: o.SKU})
		if err != nil {
			return fmt.Errorf("the price lookup for %s failed (%s)", o.SKU, sentence(err))
		}
		answered.Add(1)
		o.Cents = p.Cents
		asked := time.Since(t0).Round(100 * time.Microsecond)
		env, err := recordOrder(ctx, db, orders, *o, ex)
		if err != nil {
			return fmt.Errorf("cannot record order %s in the database (%s); check --db", o.ID, sentence(err))
		}
		corrOf[o.ID] = env.CorrelationID
		recorded = append(recorded, env)
		j.add(env.CorrelationID, "order service: price of %s is %d cents (request/reply via %s, %v)", o.SKU, p.Cents, req.ReplyQueue(), asked)
		j.add(env.CorrelationID, "order service: order %s and its OrderPlaced event %s committed in one transaction", o.ID, env.ID[:8])
		say("orders:    %s for %s at %d.%02d (price asked over request/reply in %v); order row + event committed in one transaction", o.ID, o.SKU, o.Cents/100, o.Cents%100, time.Since(t0).Round(time.Millisecond))
	}

	section("2. the relay publishes what committed")
	relay, err := outbox.NewRelay(orders, db.outbox, outbox.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return fmt.Errorf("cannot start the outbox relay (%s)", sentence(err))
	}
	// One sweep by hand (a service runs relay.Run, which sweeps every 1s).
	sw := relay.SweepOnce(ctx)
	if sw.Err != nil {
		return fmt.Errorf("the relay's sweep stopped (%s); the records stay in the outbox", sentence(sw.Err))
	}
	left, err := db.count(ctx, "acemq_outbox")
	if err != nil {
		return fmt.Errorf("cannot read the outbox (%v)", err)
	}
	for _, env := range recorded {
		j.add(env.CorrelationID, "relay: published event %s in sequence order, broker confirmed, record deleted", env.ID[:8])
	}
	say("relay:     claimed %d records, published %d in sequence order, each confirmed before its record was deleted; %d left", sw.Claimed, sw.Published, left)
	published, confirmed := int64(sw.Published), int64(sw.Published-left)

	section("3. consumers: a duplicate, a flaky warehouse, a poison order")
	if err := startConsumers(); err != nil {
		return err
	}
	// payments: 4 deliveries (o-1 twice: crash, then duplicate); inventory:
	// o-1 once, o-2 three times (two retries), o-3 once (dead-lettered).
	if err := counts.waitUntil(ctx, "the consumers to settle every delivery", func() bool {
		return counts.get(payQ) >= 4 && counts.get(invQ) >= 5
	}); err != nil {
		return err
	}

	section("4. dead letters: inspect, fix, replay")
	dlq := acemq.DeadLetterQueue(invQ)
	if err := waitDepth(ctx, services, dlq, 1); err != nil {
		return err
	}
	if isMemory(url) {
		// The in-process broker can list its queues, as `acemq dlq list`
		// does through the management API on RabbitMQ.
		if all, err := listQueues(ctx, url, ""); err == nil {
			var parts []string
			for _, q := range all {
				if isSetAside(q.Name) {
					parts = append(parts, fmt.Sprintf("%s %d", q.Name, q.Messages))
				}
			}
			say("dlq list:  %s", strings.Join(parts, ", "))
		}
	}
	// The demo declared this queue itself, as the library declares a
	// dead-letter queue (no delivery limit a read could move a message
	// toward), so it reads it without asking the management API, which a
	// broker's demo may not reach.
	read := &readFlags{mgmt: os.Getenv("ACEMQ_MANAGEMENT_URL"), unsafe: true}
	shown, err := peek(ctx, services, dlq, 1, read.options(url)...)
	if err != nil || len(shown) != 1 {
		return fmt.Errorf("cannot read the dead-lettered order from %s (%v)", dlq, err)
	}
	say("dlq:       %s holds 1 message: %s %s, reason %q", dlq, shown[0].Type, shown[0].ID[:8], shown[0].Error)
	fixed.Store(true)
	say("fix:       the catalogue now lists SKU-99 (a deploy)")
	// Journaled first: the consumer may see the message before Queue returns.
	j.add(shown[0].CorrelationID, "replay: moving %s from %s back to %s", shown[0].ID[:8], dlq, invQ)
	rep, err := replayQueue(ctx, orders, dlq, replayOptions{})
	if err != nil {
		return err
	}
	if rep.Err != nil {
		return fmt.Errorf("the replay failed (%s)", sentence(rep.Err))
	}
	say("replay:    %s", rep)
	if err := counts.waitUntil(ctx, "the replayed order to be handled", func() bool { return counts.get(invQ) >= 6 }); err != nil {
		return err
	}

	section("5. the timeline of order o-3, rebuilt from its correlation id " + corrOf["o-3"])
	for _, e := range j.timeline(corrOf["o-3"]) {
		outMu.Lock()
		fmt.Fprintf(out, "  +%5dms  %s\n", e.at.Milliseconds(), e.text)
		outMu.Unlock()
	}

	err = demoSummary(ctx, out, start, db, services, dlq, demoNumbers{
		published: published, confirmed: confirmed,
		consumed: int64(counts.get(payQ) + counts.get(invQ)),
		retried:  int64(counts.get(payQ, acemq.ConsumeRetried) + counts.get(invQ, acemq.ConsumeRetried)),
		deadLettered: int64(counts.get(payQ, acemq.ConsumeRejected, acemq.ConsumeDeadLettered, acemq.ConsumeParked) +
			counts.get(invQ, acemq.ConsumeRejected, acemq.ConsumeDeadLettered, acemq.ConsumeParked)),
		replayed: int64(rep.Moved), duplicates: duplicates.Load(), answered: answered.Load(),
	})
	if err != nil || then == nil {
		return err
	}
	return then(services)
}

// recordOrder writes the order row and its OrderPlaced event (through the
// outbox store) in one transaction, and returns the event's envelope.
func recordOrder(ctx context.Context, db *demoDB, c *acemq.Conn, o demoOrder, exchange string) (acemq.Envelope, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return acemq.Envelope{}, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO orders (id, sku, cents, created_at) VALUES (?, ?, ?, ?)`),
		o.ID, o.SKU, o.Cents, time.Now().UnixMilli()); err != nil {
		return acemq.Envelope{}, err
	}
	env, err := db.outbox.Add(ctx, tx, c, exchange, "order.placed", o, outbox.WithType("OrderPlaced"))
	if err != nil {
		return acemq.Envelope{}, err
	}
	return env, tx.Commit()
}

// ranKey marks, in a handler's context, whether the guarded charge ran.
type ranKey struct{}

// waitDepth waits until queue holds want ready messages: a set-aside copy
// is published after its settlement is reported, so it may lag a moment.
func waitDepth(ctx context.Context, c *acemq.Conn, queue string, want int) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := requireQueue(ctx, c, queue)
		if err != nil {
			return err
		}
		if n == want {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s holds %d message(s), expected %d: %w", queue, n, want, ctx.Err())
		}
	}
}

type demoNumbers struct {
	published, confirmed, consumed, retried, deadLettered, replayed, duplicates, answered int64
}

// The numbers the flow implies: 3 orders relayed once each; payments 4
// deliveries (o-1 twice: the simulated crash is a retry, then a
// duplicate), inventory 1 + 3 + 1 + 1 (replayed); retries: 1 + 2.
var demoWant = demoNumbers{published: 3, confirmed: 3, consumed: 10, retried: 3, deadLettered: 1, replayed: 1, duplicates: 1, answered: 3}

func demoSummary(ctx context.Context, out io.Writer, start time.Time, db *demoDB, c *acemq.Conn, dlq string, got demoNumbers) error {
	var lost, outboxLeft int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id)
		OR NOT EXISTS (SELECT 1 FROM reservations r WHERE r.order_id = o.id)`).Scan(&lost)
	if err == nil {
		outboxLeft, err = db.count(ctx, "acemq_outbox")
	}
	if err != nil {
		return fmt.Errorf("cannot count the results in the database (%v)", err)
	}
	dlqLeft, err := requireQueue(ctx, c, dlq)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\n— summary")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tpublished\tconfirmed\tconsumed\tretried\tdead-lettered\treplayed\tlost\t")
	fmt.Fprintf(tw, "this run\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", got.published, got.confirmed, got.consumed, got.retried, got.deadLettered, got.replayed, lost)
	w := demoWant
	fmt.Fprintf(tw, "the flow implies\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", w.published, w.confirmed, w.consumed, w.retried, w.deadLettered, w.replayed, 0)
	tw.Flush()
	fmt.Fprintf(out, "duplicates skipped %d (want %d), prices answered %d (want %d), outbox records left %d, dead letters left %d\n",
		got.duplicates, w.duplicates, got.answered, w.answered, outboxLeft, dlqLeft)
	var wrong []string
	check := func(name string, g, w int64) {
		if g != w {
			wrong = append(wrong, fmt.Sprintf("%s %d (want %d)", name, g, w))
		}
	}
	check("published", got.published, w.published)
	check("confirmed", got.confirmed, w.confirmed)
	check("consumed", got.consumed, w.consumed)
	check("retried", got.retried, w.retried)
	check("dead-lettered", got.deadLettered, w.deadLettered)
	check("replayed", got.replayed, w.replayed)
	check("duplicates skipped", got.duplicates, w.duplicates)
	check("prices answered", got.answered, w.answered)
	check("lost", int64(lost), 0)
	check("outbox records left", int64(outboxLeft), 0)
	check("dead letters left", int64(dlqLeft), 0)
	if len(wrong) > 0 {
		return fmt.Errorf("the numbers are not what the flow implies: %s; something was lost or repeated, see the narration above", strings.Join(wrong, ", "))
	}
	fmt.Fprintf(out, "every number is what the flow implies: lost = 0 (%.2fs)\n", time.Since(start).Seconds())
	return nil
}

// cleanupDemo deletes this run's queues and exchange from a shared broker.
func cleanupDemo(c *acemq.Conn, ex string, queues ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range queues {
		for _, name := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.DeleteQueue(ctx, name)
		}
	}
	if ch, err := c.Channel(ctx); err == nil {
		_ = ch.DeleteExchange(ctx, ex)
		_ = ch.Close()
	}
}
