package console

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/transport"
)

// event is one step of a message's history as its page lists it.
type event struct {
	At     time.Time // zero: the message does not say when
	What   string
	Reason string
}

// Time is the event's time for the page.
func (e event) Time() string {
	if e.At.IsZero() {
		return "time not recorded"
	}
	return e.At.UTC().Format("2006-01-02 15:04:05 UTC")
}

// history tells a failed message's story from what it carries: its first
// publish (x-acemq-first-seen), every broker dead-lettering in x-death —
// waits on a retry rung ({source}.retry.{d}, expired back home),
// rejections, delivery limits, TTLs and length limits, each with its count
// and first time — every replay (acemq-replayed-from, -at, -count), and
// the attempt that set it aside with its reason (x-acemq-attempt,
// x-acemq-error). AceMQ writes a reason only when it sets a message aside,
// so earlier attempts have a time only where a rung recorded one. Events
// with a time come in time order; the rest follow.
func history(env acemq.Envelope, h map[string]any, source string) []event {
	var out []event
	if !env.FirstSeen.IsZero() {
		out = append(out, event{At: env.FirstSeen, What: "first published (attempt 1)"})
	}
	deaths, _ := h["x-death"].([]any)
	for _, d := range deaths {
		t, ok := tableOf(d)
		if !ok {
			continue
		}
		queue, _ := t["queue"].(string)
		reason, _ := t["reason"].(string)
		count := intOf(t["count"])
		at := timeOf(t["time"])
		times := ""
		if count > 1 {
			times = fmt.Sprintf(" (%d times; the time is the first)", count)
		}
		e := event{At: at}
		switch {
		case strings.HasPrefix(queue, source+".retry.") && reason == "expired":
			e.What = fmt.Sprintf("waited %s on the retry rung %s, then went back to %s for its next attempt%s",
				strings.TrimPrefix(queue, source+".retry."), queue, source, times)
			e.Reason = "retry after a failed attempt"
		default:
			e.What = fmt.Sprintf("dead-lettered by the broker from %s%s", queue, times)
			e.Reason = brokerReason(reason)
		}
		e.What, e.Reason = safetext.Line(e.What), safetext.Line(e.Reason)
		out = append(out, e)
	}
	if from, ok := h[header.ReplayedFrom]; ok {
		at, _ := acemq.ReplayedAt(env)
		n := acemq.ReplayCount(env)
		what := fmt.Sprintf("replayed from %s", formatValue(from, ""))
		if n > 1 {
			what += fmt.Sprintf(" (replayed %d times in all; this is the last)", n)
		}
		out = append(out, event{At: at, What: safetext.Line(what)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].At, out[j].At
		if a.IsZero() != b.IsZero() {
			return !a.IsZero()
		}
		return a.Before(b)
	})
	if env.Error != "" {
		out = append(out, event{What: fmt.Sprintf("attempt %d failed and the message was set aside", max(env.Attempt, 1)), Reason: safetext.Line(env.Error)})
	}
	return out
}

// brokerReason says what RabbitMQ's x-death reason means.
func brokerReason(r string) string {
	switch r {
	case "rejected":
		return "rejected: a consumer refused it without requeueing (reason \"rejected\")"
	case "expired":
		return "expired: its time to live ran out (reason \"expired\")"
	case "maxlen":
		return "the queue was full (x-max-length; reason \"maxlen\")"
	case "delivery_limit":
		return "delivered more times than the queue's delivery limit (reason \"delivery_limit\")"
	}
	return "reason " + quote(r)
}

// tableOf reads an x-death entry, whatever table type the transport used.
func tableOf(v any) (map[string]any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return t, true
	case transport.Table:
		return t, true
	}
	return asTable(v)
}

func intOf(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case int16:
		return int64(n)
	case int8:
		return int64(n)
	case uint8:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

func timeOf(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case string:
		if p, err := time.Parse(time.RFC3339, t); err == nil {
			return p
		}
	}
	return time.Time{}
}
