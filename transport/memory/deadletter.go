package memory

import (
	"strings"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// deadLetter is a message leaving queue from for reason ("rejected",
// "expired", "maxlen").
type deadLetter struct {
	from   *queue
	m      *message
	reason string
}

// deadLetter republishes messages to their queues' dead-letter exchanges
// with RabbitMQ's x-death bookkeeping. Messages from a queue without a
// DLX, or to a missing DLX, are dropped, as RabbitMQ drops them. It must be
// called without holding any broker lock.
func (b *Broker) deadLetter(work []deadLetter) {
	var scratch []*queue
	for len(work) > 0 {
		d := work[0]
		work = work[1:]
		q := d.from
		if !q.hasDLX {
			b.emit(Event{Kind: EventDeadLettered, Properties: d.m.props, Body: d.m.body, Queue: q.name, Reason: d.reason})
			continue
		}
		if q.atLeastOnce {
			b.deliverAtLeastOnce(retained{letter: d})
			continue
		}
		key := d.m.routingKey
		if q.hasDLRK {
			key = q.dlrk
		}
		m := &message{exchange: q.dlx, routingKey: key, props: d.m.props, body: d.m.body, dead: true}
		m.props.Headers = withDeath(d.m, q.name, d.reason)
		b.mu.RLock()
		x := b.exchanges[q.dlx]
		var dst []*queue
		if q.dlx == "" {
			if t := b.queues[key]; t != nil {
				dst = append(scratch[:0], t)
			}
		} else if x != nil {
			dst = x.route(m, scratch[:0])
		}
		var reached []*queue
		for _, t := range dst {
			if d.reason != "rejected" && deathCycle(m.props.Headers, t.name) {
				continue // RabbitMQ drops messages that would cycle without a rejection
			}
			_, more := t.enqueue(m)
			work = append(work, more...)
			if b.watched() {
				reached = append(reached, t)
			}
		}
		b.mu.RUnlock()
		scratch = dst
		if b.watched() {
			b.emit(Event{Kind: EventDeadLettered, Exchange: m.exchange, RoutingKey: m.routingKey, Properties: m.props, Body: m.body, Queues: queueNames(reached), Queue: q.name, Reason: d.reason})
		}
	}
}

// withDeath returns a copy of m's headers with the x-death entry for
// (queue, reason) added or counted, and the x-first-death-* and
// x-last-death-* headers RabbitMQ writes. A message a client published
// has no death record, whatever x-death family headers it carries: they
// are replaced, as RabbitMQ 4 replaces them (3.x counted on from a
// published x-death; measured on 3.10.8 and 4.3.6).
func withDeath(m *message, queue, reason string) transport.Table {
	h := copyTable(m.props.Headers)
	if h == nil {
		h = transport.Table{}
	}
	if !m.dead {
		for k := range h {
			if k == "x-death" || strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-") {
				delete(h, k)
			}
		}
	}
	deaths, _ := h["x-death"].([]any)
	var entry transport.Table
	rest := make([]any, 0, len(deaths)+1)
	for _, d := range deaths {
		t, ok := d.(transport.Table)
		if ok && entry == nil && t["queue"] == queue && t["reason"] == reason {
			entry = t
			continue
		}
		rest = append(rest, d)
	}
	if entry == nil {
		entry = transport.Table{
			"count":        int64(0),
			"reason":       reason,
			"queue":        queue,
			"exchange":     m.exchange,
			"routing-keys": []any{m.routingKey},
			"time":         time.Now().Truncate(time.Second),
		}
	}
	// An existing entry keeps its first exchange, keys and time; only its
	// count grows, as in RabbitMQ.
	n, _ := toInt64(entry["count"])
	entry["count"] = n + 1
	h["x-death"] = append([]any{entry}, rest...)
	if _, ok := h["x-first-death-reason"]; !ok {
		h["x-first-death-reason"] = reason
		h["x-first-death-queue"] = queue
		h["x-first-death-exchange"] = m.exchange
	}
	h["x-last-death-reason"] = reason
	h["x-last-death-queue"] = queue
	h["x-last-death-exchange"] = m.exchange
	return h
}

// deathCycle reports whether dead-lettering into queue would repeat a
// cycle that involved no rejection.
func deathCycle(h transport.Table, queue string) bool {
	deaths, _ := h["x-death"].([]any)
	seen := false
	for _, d := range deaths {
		t, _ := d.(transport.Table)
		if t["reason"] == "rejected" {
			return false
		}
		if t["queue"] == queue {
			seen = true
		}
	}
	return seen
}
