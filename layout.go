package acemq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Layout is how the library declares its own queues: {q}.dlq and
// {q}.parked, the retry rungs {q}.retry.{delay}, and the scheduler's
// rungs and acemq.schedule.due. It is set once, on the Conn
// (Config.Layout), and every declaration the Conn makes follows it:
// Apply and Plan of a Topology's DeadLetters, Retries, HoldingQueue and
// DelayQueue, each consumer's dead-letter half and ladder, the scheduler.
// Names, bindings, exchanges and every hop are the same in both layouts:
// only the queues' type and arguments differ (docs/wire-contract.md).
type Layout string

// The layouts.
const (
	// ClassicLayout, the default, is the family's contract (§3.4): the
	// library's queues are classic, each living on one node, and a rung
	// has exactly three arguments. A partition, a paused minority or a
	// lost disk can lose what they hold.
	ClassicLayout Layout = "classic"
	// ReplicatedLayout declares the library's queues as quorum queues,
	// replicated on a majority of the cluster's nodes: {q}.dlq, {q}.parked
	// and acemq.schedule.due with no delivery limit (x-delivery-limit -1 on
	// RabbitMQ 4 and on memory://; RabbitMQ 3 has no default limit and
	// reads -1 as one every return exceeds, so nothing is written there),
	// and every rung with its TTL and dead-letter route plus
	// x-dead-letter-strategy at-least-once and x-overflow reject-publish,
	// so the broker moves an expired message home only once home has
	// confirmed it (RabbitMQ 3.10 and later). Recommended for any cluster.
	// Every other AceMQ library declares the classic layout: a service
	// that declares a queue the other way gets 406 PRECONDITION_FAILED
	// (Conn.Plan says so before it happens).
	ReplicatedLayout Layout = "replicated"
)

// check reports whether l is a known layout; "" is the classic one.
func (l Layout) orDefault() (Layout, bool) {
	switch l {
	case "", ClassicLayout:
		return ClassicLayout, true
	case ReplicatedLayout:
		return ReplicatedLayout, true
	}
	return l, false
}

// queueRole marks a declaration as one of the library's own queues, which
// a Conn declares in its Layout.
type queueRole uint8

const (
	roleNone    queueRole = iota
	roleHolding           // {q}.dlq, {q}.parked, acemq.schedule.due: hold messages for a consumer or a person
	roleDelay             // {q}.retry.{d}, acemq.schedule.{rung}: hold a message for its TTL, then dead-letter it
)

// HoldingQueue declares name as one of the library's holding queues (as
// DeadLetters declares {q}.dlq and {q}.parked, and the scheduler
// acemq.schedule.due): durable, no arguments, classic or quorum as the
// Conn's Layout says. Declarations and Describe show the classic form;
// Conn.Plan shows what the Conn declares.
func (t *Topology) HoldingQueue(name string) *Topology {
	t.add(holdingQueue(name))
	return t
}

// DelayQueue declares name as one of the library's delay queues (as a
// retry rung, or a scheduler rung): a message waits ttl in it, then the
// broker dead-letters it to exchange with routingKey. In the classic
// layout it has exactly the three arguments x-message-ttl,
// x-dead-letter-exchange and x-dead-letter-routing-key (contract §3.3);
// in the replicated layout it is a quorum queue that also says
// x-dead-letter-strategy at-least-once and x-overflow reject-publish.
// Validate refuses a ttl under one millisecond.
func (t *Topology) DelayQueue(name string, ttl time.Duration, exchange, routingKey string) *Topology {
	if ttl < time.Millisecond {
		t.problems = append(t.problems, fmt.Sprintf("delay queue %q has TTL %s; give it one of at least 1ms", name, ttl))
	}
	t.add(delayQueue(name, ttl, exchange, routingKey))
	return t
}

func holdingQueue(name string) Declaration {
	return Declaration{Kind: DeclQueue, Queue: transport.QueueSpec{Name: name, Durable: true}, QueueType: Classic, role: roleHolding}
}

func delayQueue(name string, ttl time.Duration, exchange, routingKey string) Declaration {
	return Declaration{Kind: DeclQueue, QueueType: Classic, role: roleDelay, Queue: transport.QueueSpec{Name: name, Durable: true, Args: transport.Table{
		"x-message-ttl":             ttl.Milliseconds(),
		"x-dead-letter-exchange":    exchange,
		"x-dead-letter-routing-key": routingKey,
	}}}
}

// layoutRules renders the library's own queues for one Conn and broker.
type layoutRules struct {
	layout Layout
	// noLimit is the x-delivery-limit value that means "no limit" on this
	// broker, or nil where writing one would set a limit (RabbitMQ 3,
	// which has no default) or the broker is unknown.
	noLimit any
}

// render returns d as these rules declare it; a declaration that is not
// one of the library's own queues comes back unchanged.
func (r layoutRules) render(d Declaration) Declaration {
	if d.Kind != DeclQueue || d.role == roleNone || r.layout != ReplicatedLayout {
		return d
	}
	args := transport.Table{"x-queue-type": string(Quorum)}
	switch d.role {
	case roleHolding:
		if r.noLimit != nil {
			args["x-delivery-limit"] = r.noLimit
		}
	case roleDelay:
		for k, v := range d.Queue.Args {
			args[k] = v
		}
		args["x-dead-letter-strategy"] = "at-least-once"
		args["x-overflow"] = "reject-publish"
	}
	d.QueueType = Quorum
	d.Queue.Args = args
	return d
}

// renderAll renders every declaration of decls.
func (r layoutRules) renderAll(decls []Declaration) []Declaration {
	out := make([]Declaration, len(decls))
	for i, d := range decls {
		out[i] = r.render(d)
	}
	return out
}

// noLimitFor is the x-delivery-limit value meaning "no limit" on a broker
// that names itself product and version (connection.start): -1 on
// RabbitMQ 4 and later and on the in-process broker; nil on RabbitMQ 3 (no
// default limit, and -1 would be a limit every return exceeds) and on a
// broker that does not say what it is.
func noLimitFor(product, version string, inProcess bool) any {
	switch {
	case inProcess:
		return int64(-1)
	case strings.EqualFold(product, "RabbitMQ"):
		major, _, _ := strings.Cut(version, ".")
		if n, err := strconv.Atoi(major); err == nil && n >= 4 {
			return int64(-1)
		}
	}
	return nil
}

// rules returns the Conn's layout rules for the broker it is connected to
// now (as it named itself when the connection opened: a rolling upgrade
// can move a Conn to another version on recovery).
func (c *Conn) rules(context.Context) (layoutRules, error) {
	r := layoutRules{layout: c.cfg.layout}
	if r.layout == ReplicatedLayout {
		product, version := c.Broker()
		r.noLimit = noLimitFor(product, version, c.links.driver.Name() == "memory")
	}
	return r, nil
}

// rendered returns decls as this Conn declares them: the library's own
// queues in its Layout.
func (c *Conn) rendered(ctx context.Context, decls []Declaration) ([]Declaration, error) {
	if c.cfg.layout != ReplicatedLayout {
		return decls, nil
	}
	r, err := c.rules(ctx)
	if err != nil {
		return nil, err
	}
	return r.renderAll(decls), nil
}

// LayoutDeclarations returns, for source queue q, the library's queues a
// consumer of q declares in this Conn's Layout on the broker it is
// connected to now: {q}.dlq and {q}.parked, then one rung per delay of
// delays (RetryQueue names). Operator tools use it to compare or move what
// the broker holds (acemq dlq migrate); it changes nothing.
func (c *Conn) LayoutDeclarations(ctx context.Context, q string, delays ...time.Duration) ([]Declaration, error) {
	r, err := c.rules(ctx)
	if err != nil {
		return nil, err
	}
	out := []Declaration{r.render(holdingQueue(DeadLetterQueue(q))), r.render(holdingQueue(ParkedQueue(q)))}
	for _, d := range delays {
		out = append(out, r.render(delayQueue(RetryQueue(q, d), d, RetryExchange, q)))
	}
	return out, nil
}

// layoutMismatch tells, once per queue and Conn, that a library queue on
// the broker is not what this Conn's layout declares, and that the Conn
// uses it as it is.
type layoutMismatch struct {
	mu   sync.Mutex
	told map[string]bool
}

func (m *layoutMismatch) first(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.told == nil {
		m.told = map[string]bool{}
	}
	if m.told[name] {
		return false
	}
	m.told[name] = true
	return true
}

// tolerateLayout is applyDeclarations' answer to a refused declaration of
// one of the library's own queues: when the queue exists (declared in the
// other layout, or by another AceMQ library), the Conn uses it as it is
// rather than failing, and says so once. A rolling move from one layout
// to the other (acemq dlq migrate) then needs no service stopped. It
// reports whether the refusal was tolerated.
func (c *Conn) tolerateLayout(ctx context.Context, d Declaration, refusal error) bool {
	if d.Kind != DeclQueue || d.role == roleNone || transport.Code(refusal) != transport.CodePreconditionFailed {
		return false
	}
	if err := declareOnce(ctx, c.channel, d, true); err != nil {
		return false
	}
	if c.mismatch.first(d.Queue.Name) {
		c.logger.Warn(layoutMismatchText(d, c.cfg.layout, brokerText(refusal)), "queue", d.Queue.Name, "layout", string(c.cfg.layout))
	}
	return true
}

// layoutMismatchText is the sentence for a library queue the broker holds
// in another form than this Conn's layout declares.
func layoutMismatchText(d Declaration, layout Layout, detail string) string {
	return fmt.Sprintf("acemq: %s is on the broker, but not as this Conn's %s layout declares it (%s); it is used as it is. To move it to the %s layout without losing a message, run `acemq dlq migrate` for its source queue (docs/topology.md#moving-to-the-replicated-layout)",
		d.Queue.Name, layout, detail, layout)
}

// planLayoutWarning is the warning a plan gives for one of the library's
// own queues that differs on the broker: who will be refused, and how to
// move it.
func planLayoutWarning(d Declaration, layout Layout) string {
	if d.Kind != DeclQueue || d.role == roleNone {
		return ""
	}
	if layout == ReplicatedLayout {
		return fmt.Sprintf("the broker holds %s in another form than the replicated layout declares (the classic layout's, probably): a Conn with the replicated layout uses it as it is and warns, and it is not replicated until `acemq dlq migrate` moves it; once moved, every service of another AceMQ library (Java, .NET, Python, Ruby) that declares it gets 406 PRECONDITION_FAILED (Go services on the classic layout use it and warn)", d.Queue.Name)
	}
	return fmt.Sprintf("the broker holds %s in another form than the classic layout declares (probably the replicated layout's quorum queue): a service of another AceMQ library (Java, .NET, Python, Ruby) that declares it gets 406 PRECONDITION_FAILED; Go services use it as it is and warn. Give every Go service Config.Layout = acemq.ReplicatedLayout, or move it back with `acemq dlq migrate --to classic`", d.Queue.Name)
}
