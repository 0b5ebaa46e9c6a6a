package acemqtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Filter narrows the records Expect and Records.Of count. Its
// description is how a failure message names it.
type Filter struct {
	desc  string
	match func(Record) bool
}

// Where is a filter of your own; desc describes it in a failure message
// ("paid over 100").
func Where(desc string, match func(Record) bool) Filter { return Filter{desc, match} }

// Type keeps messages whose envelope type is t.
func Type(t string) Filter {
	return Filter{"of type " + t, func(r Record) bool { return r.Envelope.Type == t }}
}

// Exchange keeps messages published (or scheduled) to exchange x ("" is
// the default exchange).
func Exchange(x string) Filter {
	return Filter{"on exchange " + quoteEmpty(x), func(r Record) bool { return r.Exchange == x }}
}

// RoutingKey keeps messages published (or scheduled) with routing key k.
func RoutingKey(k string) Filter {
	return Filter{"with routing key " + quoteEmpty(k), func(r Record) bool { return r.RoutingKey == k }}
}

// Queue keeps deliveries consumed from queue q and messages published
// that reached q.
func Queue(q string) Filter {
	return Filter{"on queue " + q, func(r Record) bool { return r.Queue == q || slices.Contains(r.Queues, q) }}
}

// ID keeps the message with envelope id id.
func ID(id string) Filter {
	return Filter{"with id " + id, func(r Record) bool { return r.Envelope.ID == id }}
}

// CorrelationID keeps messages carrying correlation id id.
func CorrelationID(id string) Filter {
	return Filter{"with correlation id " + id, func(r Record) bool { return r.Envelope.CorrelationID == id }}
}

// Attempt keeps deliveries (and publishes) at attempt n.
func Attempt(n int) Filter {
	return Filter{fmt.Sprintf("at attempt %d", n), func(r Record) bool { return r.Envelope.Attempt == n }}
}

// Reason keeps records whose reason (a set-aside's x-acemq-error, a
// fallback's error) contains part.
func Reason(part string) Filter {
	return Filter{fmt.Sprintf("whose reason contains %q", part), func(r Record) bool { return strings.Contains(r.Reason, part) }}
}

func matches(r Record, where []Filter) bool {
	for _, f := range where {
		if !f.match(r) {
			return false
		}
	}
	return true
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// Expect checks that exactly n records count as k and match every filter,
// and returns them. Otherwise it fails t at once (t.Fatalf) with what it
// looked for, what it saw, and what happened instead, by kind and in
// order:
//
//	acemqtest: expected 1 message published of type order.placed on exchange orders, saw 0
//	what happened:
//	  published: 1 (order.created on exchange orders key order.created ×1)
//	  consumed: 6 (orders.new retried ×5, orders.new dead_lettered ×1)
//	  dead-lettered: 1 (orders.new: exhausted 6 attempts: card declined ×1)
//	records, in order:
//	    1  +0s         published     order.created exchange orders key order.created, → orders.new, id 94f805b1
//	    …
//
// Call it after Settle (or SettleNow), from the test's goroutine.
func (h *Harness) Expect(t testing.TB, k Kind, n int, where ...Filter) Records {
	t.Helper()
	all := h.Records()
	got := all.Of(k, where...)
	if len(got) != n {
		t.Fatalf("%s", mismatch(k, n, where, got, all))
	}
	return got
}

// mismatch is Expect's failure message.
func mismatch(k Kind, n int, where []Filter, got, all Records) string {
	var b strings.Builder
	noun := "messages"
	if n == 1 {
		noun = "message"
	}
	fmt.Fprintf(&b, "acemqtest: expected %d %s %s", n, noun, k)
	for _, f := range where {
		b.WriteString(" " + f.desc)
	}
	fmt.Fprintf(&b, ", saw %d\n", len(got))
	if len(all) == 0 {
		b.WriteString("nothing happened: no message was published or consumed (did the test Settle?)")
		return b.String()
	}
	b.WriteString("what happened:\n")
	b.WriteString(all.Summary())
	b.WriteString("records, in order:\n")
	b.WriteString(all.String())
	return b.String()
}

// Summary says what the records hold, one line per kind:
// "  published: 2 (order.created on orders ×2)".
func (rs Records) Summary() string {
	var b strings.Builder
	line := func(k Kind, of Records, describe func(Record) string) {
		if len(of) == 0 {
			return
		}
		var order []string
		count := map[string]int{}
		for _, r := range of {
			d := describe(r)
			if count[d] == 0 {
				order = append(order, d)
			}
			count[d]++
		}
		parts := make([]string, 0, len(order))
		for i, d := range order {
			if i == 6 {
				parts = append(parts, fmt.Sprintf("and %d more", len(order)-6))
				break
			}
			parts = append(parts, fmt.Sprintf("%s ×%d", d, count[d]))
		}
		fmt.Fprintf(&b, "  %s: %d (%s)\n", k, len(of), strings.Join(parts, ", "))
	}
	line(Published, rs.Of(Published), func(r Record) string {
		return fmt.Sprintf("%s on %s", r.Envelope.Type, where(r))
	})
	line(Consumed, rs.Of(Consumed), func(r Record) string { return fmt.Sprintf("%s %s", r.Queue, r.Outcome) })
	for _, k := range []Kind{DeadLettered, Parked} {
		line(k, rs.Of(k), func(r Record) string { return fmt.Sprintf("%s: %s", r.Queue, r.Reason) })
	}
	line(Scheduled, rs.Of(Scheduled), func(r Record) string {
		return fmt.Sprintf("to %s due %s", where(r), r.DueAt.UTC().Format(time.RFC3339))
	})
	line(Replied, rs.Of(Replied), func(r Record) string { return "to " + r.RoutingKey })
	line(FellBack, rs.Of(FellBack), func(r Record) string { return fmt.Sprintf("%s → %s: %s", r.Queue, r.Target, r.Reason) })
	return b.String()
}

// String lists the records, one line each, oldest first (the last 50 of
// a longer list).
func (rs Records) String() string {
	var b strings.Builder
	first := 0
	if len(rs) > 50 {
		first = len(rs) - 50
		fmt.Fprintf(&b, "  … %d earlier records\n", first)
	}
	var t0 time.Time
	if len(rs) > 0 {
		t0 = rs[0].At
	}
	for i := first; i < len(rs); i++ {
		r := rs[i]
		fmt.Fprintf(&b, "  %3d  +%-10s %s\n", i+1, r.At.Sub(t0), r.describe())
	}
	return b.String()
}

// describe renders one record on one line.
func (r Record) describe() string {
	id := shortID(r.Envelope.ID)
	switch r.Kind {
	case Published, Replied:
		to := "unroutable"
		if r.Nacked {
			to = "refused by the broker"
		} else if len(r.Queues) > 0 {
			to = "→ " + strings.Join(r.Queues, ", ")
		}
		return fmt.Sprintf("%-13s %s %s, %s, id %s", r.Kind, r.Envelope.Type, where(r), to, id)
	case Consumed:
		s := fmt.Sprintf("%-13s %s attempt %d from %s: %s", r.Kind, r.Envelope.Type, r.Envelope.Attempt, r.Queue, r.Outcome)
		if r.Target != "" && r.Target != r.Queue {
			s += " → " + r.Target
		}
		if r.RetryDelay > 0 {
			where := "in the consumer"
			if r.InBroker {
				where = "on a broker rung"
			}
			s += fmt.Sprintf(" after %s %s", r.RetryDelay, where)
		}
		if r.Reason != "" {
			s += " (" + r.Reason + ")"
		}
		return s + ", id " + id
	case Scheduled:
		return fmt.Sprintf("%-13s for %s due %s, id %s", r.Kind, where(r), r.DueAt.UTC().Format(time.RFC3339Nano), id)
	case FellBack:
		return fmt.Sprintf("%-13s %s → %s: %s, id %s", r.Kind, r.Queue, r.Target, r.Reason, id)
	}
	return r.Kind.String()
}

// where is "exchange orders key order.placed", or "queue q" for the
// default exchange.
func where(r Record) string {
	if r.Exchange == "" {
		return "queue " + r.RoutingKey
	}
	return fmt.Sprintf("exchange %s key %s", r.Exchange, quoteEmpty(r.RoutingKey))
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
