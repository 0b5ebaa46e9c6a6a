package acemq

import (
	"fmt"
	"reflect"

	"github.com/acemq-go/acemq/transport"
)

// queuePolicy is one Topology.Retries call.
type queuePolicy struct {
	queue  string
	policy RetryPolicy
}

// quorumDefaultDeliveryLimit is RabbitMQ 4's delivery limit for a quorum
// queue declared without x-delivery-limit.
const quorumDefaultDeliveryLimit = 20

// inQueue reports whether q's waits are held in the queue under this
// resolution: always for WaitsInQueue, for WaitsInQueueWhereSupported when
// resolved says so.
func (qp queuePolicy) inQueue(resolved map[string]bool) bool {
	switch {
	case !qp.policy.holdsInQueue() || qp.policy.Err() != nil:
		return false
	case qp.policy.waits == WaitsInQueue:
		return true
	}
	return resolved[qp.queue]
}

// withRetryWaits adds the delayed retry arguments to each queue whose waits
// are held in it (resolved: see declarationsFor) and drops the ladder a
// WaitsInQueueWhereSupported policy added for it. decls is changed in
// place where it can be.
func (t *Topology) withRetryWaits(decls []Declaration, resolved map[string]bool) []Declaration {
	held := map[string]RetryPolicy{}
	for _, qp := range t.policies {
		if qp.inQueue(resolved) {
			held[qp.queue] = qp.policy
		}
	}
	if len(held) == 0 {
		return decls
	}
	// The rung queues and home bindings of the queues now held in place.
	drop := map[string]bool{}
	for q, p := range held {
		if p.waits != WaitsInQueueWhereSupported {
			continue
		}
		for _, d := range retryLadder(q, p) {
			if d.Kind != DeclExchange {
				drop[declKey(d)] = true
			}
		}
	}
	out := decls[:0]
	retryBindings := 0
	for _, d := range decls {
		if drop[declKey(d)] {
			continue
		}
		if d.Kind == DeclQueue {
			if p, ok := held[d.Queue.Name]; ok {
				d.Queue.Args = mergeTable(d.Queue.Args, p.delayedRetryArguments())
			}
		}
		if d.Kind == DeclBinding && d.Binding.Exchange == RetryExchange {
			retryBindings++
		}
		out = append(out, d)
	}
	if retryBindings > 0 {
		return out
	}
	// No ladder is left: acemq.retry goes too, unless the topology
	// declares it in another form of its own.
	ladderExchange := Declaration{Kind: DeclExchange, Exchange: transport.ExchangeSpec{Name: RetryExchange, Kind: Direct, Durable: true}}
	kept := out[:0]
	for _, d := range out {
		if d.Kind == DeclExchange && identical(d, ladderExchange) {
			continue
		}
		kept = append(kept, d)
	}
	return kept
}

// retryWaitProblems checks each policy that holds its waits in the queue
// (always or where supported): the queue must be a quorum queue this
// topology declares, its own arguments must not set delayed retry
// differently, and its delivery limit must let every attempt through
// (RabbitMQ ends a message whose delivery count passes the limit: dropped,
// or dead-lettered when the queue has dead-letter wiring).
func (t *Topology) retryWaitProblems(decls []Declaration) []string {
	var problems []string
	for _, qp := range t.policies {
		p := qp.policy
		if !p.holdsInQueue() || p.Err() != nil {
			continue
		}
		var q *Declaration
		for i := range t.decls {
			if t.decls[i].Kind == DeclQueue && t.decls[i].Queue.Name == qp.queue {
				q = &t.decls[i]
				break
			}
		}
		if q == nil {
			problems = append(problems, fmt.Sprintf("Retries holds the waits of queue %q in the queue (%s), but this topology does not declare it; declare it here, since its arguments carry the delayed retry", qp.queue, p))
			continue
		}
		if q.QueueType != Quorum {
			problems = append(problems, fmt.Sprintf("Retries holds the waits of queue %q in the queue, but it is a %s queue: only quorum queues hold retry waits (RabbitMQ 4.3's delayed retry). Use a quorum queue, or HoldWaits(WaitsOnRungs).", qp.queue, q.QueueType))
			continue
		}
		want := p.delayedRetryArguments()
		for name, v := range want {
			if got, ok := q.Queue.Args[name]; ok && !reflect.DeepEqual(got, v) {
				problems = append(problems, fmt.Sprintf("queue %q sets %s=%v, but its retry policy %s holds its waits there with %s=%v; drop the argument (Retries writes it)", qp.queue, name, got, p, name, v))
			}
		}
		limit, word := quorumDefaultDeliveryLimit, "RabbitMQ 4's default"
		if v, ok := q.Queue.Args["x-delivery-limit"]; ok {
			n, isInt := argInt(v)
			if !isInt || n < 0 {
				continue // unlimited (-1), or refused elsewhere
			}
			limit, word = int(n), "its x-delivery-limit"
		}
		if retries := p.attemptLimit() - 1; retries > limit {
			problems = append(problems, fmt.Sprintf("queue %q holds %d retries in the queue, but RabbitMQ ends a message there after %d returns (%s): set QueueOptions{DeliveryLimit: %d} or more (or -1 for none), or allow fewer attempts", qp.queue, retries, limit, word, retries))
		}
	}
	return problems
}

// argInt reads an integer argument of any width.
func argInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
