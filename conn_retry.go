package acemq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Broker returns the product and version the broker named when the Conn's
// current consuming connection opened ("RabbitMQ", "4.3.6"), from AMQP's
// server properties; empty strings for a broker that names none
// (memory://) and while the Conn has no connection. After a recovery it is
// the broker the Conn reached last, which in a cluster being upgraded may
// be another version. Safe for concurrent use.
func (c *Conn) Broker() (product, version string) {
	_, cc := c.links.current()
	if bi, ok := cc.(transport.BrokerIdentity); ok {
		return bi.Broker()
	}
	return "", ""
}

// PlanRetry says where one queue's retry waits are held on this broker:
// one per Topology.Retries call, in order.
type PlanRetry struct {
	Queue  string
	Policy RetryPolicy
	// Waits is WaitsInQueue or WaitsOnRungs: what Apply declares, and what
	// the Conn's consumers of the queue do, on this broker.
	Waits RetryWaits
	// Why says why, in a sentence naming the broker or the rungs.
	Why string
}

// String renders "retries of queue {q}: waits {where}: {why}".
func (r PlanRetry) String() string {
	return fmt.Sprintf("retries of queue %s (%s): waits %v: %s", r.Queue, r.Policy, r.Waits, r.Why)
}

// resolveRetryWaits decides where each Retries policy of t holds its waits
// on the broker this Conn reaches: it fails for a WaitsInQueue policy the
// broker cannot hold, and resolves WaitsInQueueWhereSupported to the queue
// where the broker offers delayed retry and the queue can take the
// arguments (it does not exist yet, or already has them; a queue that
// exists without them keeps its waits on rungs, since RabbitMQ refuses to
// change a queue's arguments). It changes nothing on the broker: the
// checks are a passive declaration and an identical re-declaration of an
// existing queue.
func (c *Conn) resolveRetryWaits(ctx context.Context, t *Topology) (map[string]bool, []PlanRetry, error) {
	product, version := c.Broker()
	supported, why := delayedRetrySupport(product, version)
	broker := strings.TrimSpace(product + " " + version)
	resolved := map[string]bool{}
	var out []PlanRetry
	for _, qp := range t.policies {
		p, q := qp.policy, qp.queue
		r := PlanRetry{Queue: q, Policy: p, Waits: WaitsOnRungs}
		switch {
		case !p.holdsInQueue():
			r.Why = rungWords(q, p)
		case p.waits == WaitsInQueue && !supported:
			return nil, nil, fmt.Errorf("acemq: the retry policy of queue %q holds its waits in the queue, but %s; use HoldWaits(WaitsInQueueWhereSupported) to keep them on rungs there, or WaitsOnRungs", q, why)
		case p.waits == WaitsInQueue:
			r.Waits, r.Why = WaitsInQueue, inQueueWords(broker, p)
		case !supported:
			r.Why = why + ", so " + rungWords(q, p)
		default:
			ok, refused, err := c.queueTakesDelayedRetry(ctx, t, q)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				resolved[q] = true
				r.Waits, r.Why = WaitsInQueue, inQueueWords(broker, p)
			} else {
				r.Why = fmt.Sprintf("queue %s exists without delayed retry arguments (the broker said: %s), and RabbitMQ does not change a queue's arguments, so %s until it is declared anew", q, refused, rungWords(q, p))
			}
		}
		out = append(out, r)
	}
	return resolved, out, nil
}

// queueTakesDelayedRetry reports whether queue q can be declared with its
// delayed retry arguments: it does not exist, or an identical
// re-declaration with them is accepted. refused is the broker's text when
// it is not.
func (c *Conn) queueTakesDelayedRetry(ctx context.Context, t *Topology, q string) (ok bool, refused string, err error) {
	var d Declaration
	for _, x := range t.declarationsFor(map[string]bool{q: true}) {
		if x.Kind == DeclQueue && x.Queue.Name == q {
			d = x
		}
	}
	switch err := declareOnce(ctx, c.channel, d, true); {
	case transport.Code(err) == transport.CodeNotFound:
		return true, "", nil
	case err != nil:
		return false, "", fmt.Errorf("acemq: cannot check queue %q on the broker: %w", q, err)
	}
	switch err := declareOnce(ctx, c.channel, d, false); {
	case err == nil:
		return true, "", nil
	case transport.Code(err) == transport.CodePreconditionFailed:
		return false, brokerText(err), nil
	default:
		return false, "", fmt.Errorf("acemq: cannot check queue %q on the broker: %w", q, err)
	}
}

// inQueueWords describes waits held in the queue.
func inQueueWords(broker string, p RetryPolicy) string {
	lo, hi := p.inQueueBounds()
	return fmt.Sprintf("%s holds them in the queue (x-delayed-retry-type %s, min %v, max %v: min × delivery count, capped at max)",
		broker, delayedRetryType, time.Duration(lo)*time.Millisecond, time.Duration(hi)*time.Millisecond)
}

// rungWords describes waits held on rungs and in the consumer.
func rungWords(q string, p RetryPolicy) string {
	rungs := p.BrokerDelays()
	if p.attemptLimit() < 2 {
		return "the policy never waits"
	}
	if len(rungs) == 0 {
		return "they wait in the consumer"
	}
	names := make([]string, len(rungs))
	for i, d := range rungs {
		names[i] = RetryQueue(q, d)
	}
	s := "they wait on rungs " + strings.Join(names, ", ")
	if p.delayAt(0) < rungs[0] {
		s += " (shorter waits in the consumer)"
	}
	return s
}

// consumerWaitsInQueue decides, when a consumer of queue starts with
// policy, whether its waits are held in the queue: for WaitsInQueue when
// the broker offers delayed retry (an error saying why not otherwise, or
// when this Conn declared the queue without the arguments), for
// WaitsInQueueWhereSupported when this Conn declared the queue with them
// (Apply resolved it so). A queue this Conn did not declare keeps
// WaitsInQueueWhereSupported on rungs: the consumer cannot read a queue's
// arguments.
func (c *Conn) consumerWaitsInQueue(queue string, policy RetryPolicy) (bool, error) {
	if !policy.holdsInQueue() {
		return false, nil
	}
	declaredWith := true
	declared := false
	for name, v := range policy.delayedRetryArguments() {
		got, ok := c.decls.queueArg(queue, name)
		if !ok || !argEqual(got, v) {
			declaredWith = false
		}
	}
	for _, d := range c.decls.list() {
		if d.Kind == DeclQueue && d.Queue.Name == queue {
			declared = true
		}
	}
	if policy.waits == WaitsInQueueWhereSupported {
		return declared && declaredWith, nil
	}
	if supported, why := delayedRetrySupport(c.Broker()); !supported {
		return false, configErr("RetryPolicy", "the policy holds the waits of queue %q in the queue, but %s; use HoldWaits(WaitsInQueueWhereSupported) to keep them on rungs there, or WaitsOnRungs", queue, why)
	}
	if declared && !declaredWith {
		return false, configErr("RetryPolicy", "the policy holds the waits of queue %q in the queue, but this Conn declared the queue without its delayed retry arguments; declare it with Topology.Retries(%q, policy)", queue, queue)
	}
	return true, nil
}

// argEqual compares two argument values, integers by value whatever their
// width.
func argEqual(a, b any) bool {
	if x, ok := argInt(a); ok {
		y, ok := argInt(b)
		return ok && x == y
	}
	return a == b
}
