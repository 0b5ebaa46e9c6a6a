package acemqtest

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/schedule"
	"github.com/acemq-go/acemq/transport/memory"
)

// Kind is what a Record says happened, and what Expect counts.
type Kind uint8

// The kinds of record. Consumed covers every settled delivery; Acked,
// Retried, DeadLettered, Parked, InProgress and Released count the
// settlements with that outcome (DeadLettered: both outcomes that go to
// the dead-letter queue, rejected and dead_lettered).
const (
	// Published: a message reached the broker from the service: a Send or
	// Publish, a request, an outbox relay's publish, the scheduler's
	// delivery when a scheduled message falls due. The engine's own hops
	// (retry copies, set-aside copies, put-backs) are not published: the
	// Consumed record that caused them says where they went.
	Published Kind = iota + 1
	// Consumed: a consumer settled a delivery (Outcome says how).
	Consumed
	Acked
	Retried
	DeadLettered
	Parked
	InProgress
	Released
	// Scheduled: a message was scheduled for later (package schedule);
	// DueAt is when, Exchange and RoutingKey where it will go.
	Scheduled
	// Replied: a responder's reply to a request reached the broker.
	Replied
	// FellBack: a hop could not be made: a set-aside copy that failed, or
	// a retry rung that is missing (Reason says why).
	FellBack
)

// String is the kind as failure messages write it ("dead-lettered").
func (k Kind) String() string {
	switch k {
	case Published:
		return "published"
	case Consumed:
		return "consumed"
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case DeadLettered:
		return "dead-lettered"
	case Parked:
		return "parked"
	case InProgress:
		return "in progress"
	case Released:
		return "released"
	case Scheduled:
		return "scheduled"
	case Replied:
		return "replied"
	case FellBack:
		return "fell back"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Has reports whether r counts as k: a record's own kind, and for a
// Consumed record the kind of its outcome.
func (k Kind) Has(r Record) bool {
	if r.Kind == k {
		return true
	}
	if r.Kind != Consumed {
		return false
	}
	switch k {
	case Acked:
		return r.Outcome == acemq.ConsumeAcked
	case Retried:
		return r.Outcome == acemq.ConsumeRetried
	case DeadLettered:
		return r.Outcome == acemq.ConsumeRejected || r.Outcome == acemq.ConsumeDeadLettered
	case Parked:
		return r.Outcome == acemq.ConsumeParked
	case InProgress:
		return r.Outcome == acemq.ConsumeInProgress
	case Released:
		return r.Outcome == acemq.ConsumeReleased
	}
	return false
}

// Record is one thing that happened to a message, in the order the
// harness saw it.
type Record struct {
	Kind Kind
	// At is the virtual time it happened.
	At time.Time
	// Exchange and RoutingKey are where a message was published (for a
	// Scheduled record: where it will be delivered).
	Exchange   string
	RoutingKey string
	// Queues are the queues a published message reached (none: it was
	// unroutable, or refused: Nacked), or the rung a scheduled one waits on.
	Queues []string
	Nacked bool
	// Queue is the queue a Consumed (or FellBack) delivery came from.
	Queue string
	// Outcome is what the engine did with a Consumed delivery.
	Outcome acemq.Outcome
	// Target is where it went: {queue}.dlq, {queue}.parked, a retry rung,
	// the queue itself for a put-back; for FellBack the queue that could
	// not be reached. Empty for an ack.
	Target string
	// Reason is the x-acemq-error of a set-aside copy, or why a hop fell
	// back.
	Reason string
	// RetryDelay is the wait before the next attempt (Retried,
	// InProgress), InBroker whether it is held on a broker rung.
	RetryDelay time.Duration
	InBroker   bool
	// DueAt is when a Scheduled message falls due.
	DueAt time.Time
	// Envelope is the message's envelope (its id, type, attempt,
	// correlation, headers).
	Envelope    acemq.Envelope
	ContentType string
	// Body is the message's bytes as published; for a Consumed record,
	// the bytes of the last publish of the same message id, when the
	// harness saw it. Read only.
	Body []byte
}

// Records is a list of records, oldest first.
type Records []Record

// Of returns the records that count as k and match every filter.
func (rs Records) Of(k Kind, where ...Filter) Records {
	var out Records
	for _, r := range rs {
		if k.Has(r) && matches(r, where) {
			out = append(out, r)
		}
	}
	return out
}

// recorder keeps the records and what it needs to classify publishes.
type recorder struct {
	mu      sync.Mutex
	now     func() time.Time
	records Records
	// hops are the engine's own republishes a settlement announced, by
	// message id: the targets their publishes will go to.
	hops map[string][]string
	// replyTo maps a request's id to its reply address.
	replyTo map[string]string
	// scheduled holds the ids of scheduled messages already recorded.
	scheduled map[string]bool
	// bodies maps a message id to its last published body and type.
	bodies map[string]bodyOf
	// routing maps a publish's broker sequence to its record's index, until
	// the broker says where it went.
	routing map[uint64]int
}

type bodyOf struct {
	contentType string
	body        []byte
}

func (r *recorder) init() {
	r.now = time.Now
	r.hops, r.replyTo, r.scheduled, r.bodies = map[string][]string{}, map[string]string{}, map[string]bool{}, map[string]bodyOf{}
	r.routing = map[uint64]int{}
}

func (r *recorder) add(rec Record) {
	rec.At = r.now()
	r.records = append(r.records, rec)
}

// Records returns every record so far, oldest first.
func (h *Harness) Records() Records {
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	return slices.Clone(h.rec.records)
}

// observe is the broker watch: publishes become records, and every event
// wakes Settle.
func (h *Harness) observe(e memory.Event) {
	switch e.Kind {
	case memory.EventPublished:
		h.published(e)
	case memory.EventRouted:
		h.routed(e)
	}
	h.signal()
}

// routed fills in where a recorded publish went.
func (h *Harness) routed(e memory.Event) {
	r := &h.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.routing[e.Seq]
	if !ok {
		return
	}
	delete(r.routing, e.Seq)
	r.records[i].Queues, r.records[i].Nacked = e.Queues, e.Nacked
}

func (h *Harness) published(e memory.Event) {
	p := e.Properties
	env := acemq.ReadEnvelope(p.Headers, e.RoutingKey, p.MessageID, p.ReplyTo)
	rec := Record{
		Kind: Published, Exchange: e.Exchange, RoutingKey: e.RoutingKey,
		Envelope: env, ContentType: p.ContentType, Body: e.Body,
	}
	r := &h.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Exchange == schedule.Exchange {
		if r.scheduled[env.ID] {
			return // a later hop down the ladder
		}
		r.scheduled[env.ID] = true
		rec.Kind = Scheduled
		rec.Exchange, _ = headerString(env, schedule.HeaderExchange)
		rec.RoutingKey, _ = headerString(env, schedule.HeaderRoutingKey)
		if ct, ok := headerString(env, schedule.HeaderContentType); ok {
			rec.ContentType = ct
		}
		if v, ok := env.Header(schedule.HeaderDueAt); ok {
			if ms, ok := toInt64(v); ok {
				rec.DueAt = time.UnixMilli(ms)
			}
		}
		r.routing[e.Seq] = len(r.records)
		r.add(rec)
		return
	}
	if e.Exchange == "" {
		if targets := r.hops[env.ID]; slices.Contains(targets, e.RoutingKey) {
			i := slices.Index(targets, e.RoutingKey)
			r.hops[env.ID] = slices.Delete(targets, i, i+1)
			if len(r.hops[env.ID]) == 0 {
				delete(r.hops, env.ID)
			}
			return // the engine's own hop; its Consumed record says where
		}
		if to, ok := r.replyTo[env.CausationID]; ok && to == e.RoutingKey {
			rec.Kind = Replied
		}
	}
	if env.ReplyTo != "" {
		r.replyTo[env.ID] = env.ReplyTo
	}
	r.bodies[env.ID] = bodyOf{p.ContentType, e.Body}
	r.routing[e.Seq] = len(r.records)
	r.add(rec)
}

// settled records a settlement; it announces the engine's hop that follows.
func (h *Harness) settled(s acemq.Settlement) {
	r := &h.rec
	r.mu.Lock()
	if s.Target != "" {
		r.hops[s.Envelope.ID] = append(r.hops[s.Envelope.ID], s.Target)
	}
	b := r.bodies[s.Envelope.ID]
	r.add(Record{
		Kind: Consumed, Queue: s.Queue, Outcome: s.Outcome, Target: s.Target, Reason: s.Reason,
		RetryDelay: s.RetryDelay, InBroker: s.InBroker, Envelope: s.Envelope, ContentType: b.contentType, Body: b.body,
	})
	r.mu.Unlock()
	h.signal()
}

// fellBack records a hop that could not be made. A missing rung's retry
// waits in the consumer instead and is then put back on the queue: that
// put-back is announced too.
func (h *Harness) fellBack(f acemq.Fallback) {
	r := &h.rec
	r.mu.Lock()
	if f.Kind == "rung_missing" {
		r.hops[f.Envelope.ID] = append(r.hops[f.Envelope.ID], f.Queue)
	}
	reason := f.Kind
	if f.Err != nil {
		reason += ": " + f.Err.Error()
	}
	r.add(Record{Kind: FellBack, Queue: f.Queue, Target: f.Target, Reason: reason, Envelope: f.Envelope})
	r.mu.Unlock()
	h.signal()
}

func headerString(env acemq.Envelope, name string) (string, bool) {
	v, ok := env.Header(name)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int:
		return int64(x), true
	case uint64:
		return int64(x), true
	case float64:
		return int64(x), true
	}
	return 0, false
}
