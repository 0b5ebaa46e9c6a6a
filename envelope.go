package acemq

import (
	"crypto/rand"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/internal/idtext"
	"github.com/acemq-go/acemq/transport"
)

// Envelope is the metadata every AceMQ message carries. It is a value:
// copies are independent and the With methods return new envelopes, so an
// envelope describing a message already sent or received never changes.
// Application headers are reached through Header and Headers.
type Envelope struct {
	ID            string
	Type          string
	Version       int
	CorrelationID string
	CausationID   string
	Attempt       int
	// FirstSeen is when the message was first published; zero when unknown.
	FirstSeen time.Time
	Origin    string
	// Error is the reason a set-aside copy was set aside.
	Error string
	Claim string
	// Route, RoutePosition and RouteID are the declared-pipeline itinerary.
	Route         []string
	RoutePosition int
	RouteID       string
	ReplyTo       string

	headers map[string]any
}

// NewEnvelope returns an envelope with the sender's defaults: a fresh UUID
// v4 id, correlation equal to it, version and attempt 1, first-seen now.
// Type and origin are filled in at publish time when left empty.
//
// First-seen is the current time in UTC truncated to the millisecond, the
// precision it has on the wire, so an envelope compares equal to itself
// after a round trip through the broker.
func NewEnvelope() Envelope { return newEnvelopeWithID(newUUID()) }

// newEnvelopeWithID is NewEnvelope with a fresh id made by the caller.
func newEnvelopeWithID(id string) Envelope {
	return Envelope{
		ID:            id,
		CorrelationID: id,
		Version:       1,
		Attempt:       1,
		FirstSeen:     nowMillis(),
	}
}

// Header returns one application header.
func (e Envelope) Header(name string) (any, bool) { v, ok := e.headers[name]; return v, ok }

// Headers returns a copy of the application headers (never x-acemq-*).
// The map is never nil; changing it does not change the envelope.
func (e Envelope) Headers() map[string]any {
	h := make(map[string]any, len(e.headers))
	maps.Copy(h, e.headers)
	return h
}

// WithHeader returns a copy with one application header set. A name in the
// reserved x-acemq- namespace is refused with the contract error and the
// envelope is returned unchanged.
//
// The refusal is a *ReservedHeaderError whose text is the contract §8.6
// sentence. An empty name or a nil value is refused too, also leaving the
// envelope unchanged: WithHeader sets a value, WithoutHeader removes one.
// (A null header received from another client is kept, and WithHeaders
// copies it across as AMQP's void value.)
func (e Envelope) WithHeader(name string, value any) (Envelope, error) {
	if strings.HasPrefix(name, header.ReservedPrefix) {
		return e, reservedHeaderError(name)
	}
	if name == "" {
		return e, fmt.Errorf("acemq: a header name cannot be empty; give the header a name of your own, such as x-yourcompany-tenant")
	}
	if value == nil {
		return e, fmt.Errorf("acemq: header %q has a nil value; give it a value, or use WithoutHeader to remove the header", name)
	}
	c := e.clone(1)
	c.headers[name] = value
	return c, nil
}

// WithHeaders returns a copy with every header in h set, silently skipping
// reserved x-acemq- names (the copy-from-incoming path). Empty names are
// skipped as well. A nil value is kept and written as AMQP's null ('V'):
// a received message's headers, which may hold one, copy across whole.
func (e Envelope) WithHeaders(h map[string]any) Envelope {
	c := e.clone(len(h))
	for k, v := range h {
		if k == "" || strings.HasPrefix(k, header.ReservedPrefix) {
			continue
		}
		c.headers[k] = v
	}
	return c
}

// WithoutHeader returns a copy without the named application header.
func (e Envelope) WithoutHeader(name string) Envelope {
	c := e.clone(0)
	delete(c.headers, name)
	return c
}

// nextAttempt returns a copy with Attempt + 1 (everything else kept); the
// largest attempt an int holds stays the largest rather than wrapping.
func (e Envelope) nextAttempt() Envelope {
	c := e.clone(0)
	if c.Attempt < math.MaxInt {
		c.Attempt++
	}
	return c
}

// CausedBy returns a new message's envelope derived from parent: a fresh id,
// parent's correlation, causation = parent's id, attempt 1, first-seen now,
// this envelope's type, version and headers.
//
// Origin is kept from this envelope too; error, claim, route and reply-to
// are not carried. A parent without a correlation contributes its id as
// the correlation (the read rule). A version of 0 (the zero Envelope's,
// meaning unset) becomes 1; a negative version is kept so Validate reports it.
func (e Envelope) CausedBy(parent Envelope) Envelope {
	id := newUUID()
	corr := parent.CorrelationID
	if corr == "" {
		corr = parent.ID
	}
	if corr == "" {
		corr = id
	}
	version := e.Version
	if version == 0 {
		version = 1
	}
	var h map[string]any
	if len(e.headers) > 0 {
		h = maps.Clone(e.headers)
	}
	return Envelope{
		ID:            id,
		Type:          e.Type,
		Version:       version,
		CorrelationID: corr,
		CausationID:   parent.ID,
		Attempt:       1,
		FirstSeen:     nowMillis(),
		Origin:        e.Origin,
		headers:       h,
	}
}

// Validate reports an envelope that cannot be sent: a text field that is
// not UTF-8, version or attempt below 1, or a malformed route.
//
// A route is malformed when it is present (non-nil) with no step, has a
// blank step or a step containing ",", or when the route position is
// negative. Nothing is corrected: the error says what to change.
func (e Envelope) Validate() error {
	for _, f := range [...]struct{ name, v string }{
		{"id", e.ID}, {"type", e.Type}, {"correlation id", e.CorrelationID},
		{"causation id", e.CausationID}, {"origin", e.Origin}, {"error", e.Error},
		{"claim", e.Claim}, {"route id", e.RouteID}, {"reply-to", e.ReplyTo},
	} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("acemq: envelope %s %s is not UTF-8 text; headers carry UTF-8 strings only (contract §1.4), so give it as UTF-8", f.name, idtext.Quote(f.v))
		}
	}
	if e.Version < 1 {
		return fmt.Errorf("acemq: envelope version %d is below 1; payload schema versions start at 1", e.Version)
	}
	if e.Attempt < 1 {
		return fmt.Errorf("acemq: envelope attempt %d is below 1; the first delivery is attempt 1", e.Attempt)
	}
	if e.RoutePosition < 0 {
		return fmt.Errorf("acemq: route position %d is negative; positions count steps from 0", e.RoutePosition)
	}
	if e.Route != nil && len(e.Route) == 0 {
		return fmt.Errorf("acemq: the route has no step; give it at least one step or leave Route nil")
	}
	for i, step := range e.Route {
		if strings.TrimSpace(step) == "" {
			return fmt.Errorf("acemq: route step %d is blank; every step names the queue or step it goes to", i)
		}
		if !utf8.ValidString(step) {
			return fmt.Errorf("acemq: route step %q is not UTF-8 text; headers carry UTF-8 strings only (contract §1.4)", step)
		}
		if strings.Contains(step, ",") {
			return fmt.Errorf("acemq: route step %q contains \",\", which separates steps on the wire; rename the step", step)
		}
	}
	return nil
}

// render writes the engine headers (always id, type, version, correlation,
// attempt, first-seen, origin; the rest when non-empty) and the
// application headers into a new table.
//
// No engine header is ever written as "" or nil: an empty string field is
// left out (the engine fills id, type and origin before rendering), an empty
// correlation is written as the id, and an unknown (zero) first-seen is
// left out. Application headers never overwrite engine headers: one in the
// reserved namespace is never written, and acemq-reply-to is written from
// ReplyTo alone (reading sets ReplyTo from that header, so it round-trips).
// Application headers are written as given, a null one included.
func (e Envelope) render() transport.Table {
	t := make(transport.Table, e.renderedLen())
	for k, v := range e.headers {
		if k == header.ReplyTo || strings.HasPrefix(k, header.ReservedPrefix) {
			continue
		}
		t[k] = v
	}
	// The id is boxed once: by default the correlation is the same string.
	var id any = e.ID
	if e.ID != "" {
		t[header.ID] = id
	}
	if e.Type != "" {
		t[header.Type] = lastType.box(e.Type)
	}
	t[header.Version] = wireInt(int64(e.Version))
	if corr := e.CorrelationID; corr != "" && corr != e.ID {
		t[header.Correlation] = corr
	} else if e.ID != "" {
		t[header.Correlation] = id
	}
	t[header.Attempt] = wireInt(int64(e.Attempt))
	if !e.FirstSeen.IsZero() {
		t[header.FirstSeen] = boxMillis(e.FirstSeen.UnixMilli())
	}
	if e.Origin != "" {
		t[header.Origin] = lastOrigin.box(e.Origin)
	}
	putString(t, header.Causation, e.CausationID)
	putString(t, header.Error, e.Error)
	putString(t, header.Claim, e.Claim)
	if len(e.Route) > 0 {
		t[header.Route] = strings.Join(e.Route, ",")
		t[header.RoutePosition] = wireInt(int64(e.RoutePosition))
		putString(t, header.RouteID, e.RouteID)
	}
	putString(t, header.ReplyTo, e.ReplyTo)
	return t
}

// renderedLen is how many entries render writes, counting every
// application header (some may be skipped): the map is sized exactly, since
// a hint one past a map group's eight slots makes Go allocate two groups,
// which a publish carrying one application header (a traceparent) paid.
func (e *Envelope) renderedLen() int {
	n := len(e.headers) + 2 // version, attempt
	if e.ID != "" {
		n += 2 // id, correlation
	} else if e.CorrelationID != "" {
		n++
	}
	for _, s := range [...]string{e.Type, e.Origin, e.CausationID, e.Error, e.Claim, e.ReplyTo} {
		if s != "" {
			n++
		}
	}
	if !e.FirstSeen.IsZero() {
		n++
	}
	if len(e.Route) > 0 {
		n += 2
		if e.RouteID != "" {
			n++
		}
	}
	return n
}

// boxedString is a string and its boxed header value. Boxing a string for
// the header table allocates; a process's origin rarely changes, and a
// publisher's type (its routing key) is the same on every message, so the
// last one boxed is kept and reused when it matches.
type boxedString struct {
	s string
	v any
}

// stringBox caches the last string boxed. It is safe for concurrent use;
// under two alternating strings it only boxes as often as without it.
type stringBox struct{ p atomic.Pointer[boxedString] }

var lastOrigin, lastType stringBox

// box returns s as a header value, reusing the last box when it matches.
func (c *stringBox) box(s string) any {
	if b := c.p.Load(); b != nil && b.s == s {
		return b.v
	}
	b := &boxedString{s: s, v: s}
	c.p.Store(b)
	return b.v
}

// boxedMillis is a first-seen time boxed for the header table.
type boxedMillis struct {
	ms int64
	v  any
}

var lastMillis atomic.Pointer[boxedMillis]

// boxMillis returns ms as a header value (int64), reusing the last box
// when it is the same millisecond, as it is for most of a burst.
func boxMillis(ms int64) any {
	if b := lastMillis.Load(); b != nil && b.ms == ms {
		return b.v
	}
	b := &boxedMillis{ms: ms, v: ms}
	lastMillis.Store(b)
	return b.v
}

// putString writes a non-empty string header.
func putString(t transport.Table, name, value string) {
	if value != "" {
		t[name] = value
	}
}

// wireInt writes an integer as int32 when it fits (what Java writes for
// version, attempt and position) and int64 otherwise.
func wireInt(v int64) any {
	if v >= -1<<31 && v < 1<<31 {
		return int32(v)
	}
	return v
}

// ReservedHeaderError refuses an application header in the reserved
// x-acemq- namespace (contract §8.6). Its text is the contract sentence.
type ReservedHeaderError struct {
	// Name is the refused header name.
	Name string
}

// Error returns the contract §8.6 sentence naming the header.
func (e *ReservedHeaderError) Error() string {
	return `acemq: header "` + e.Name + `" is in the reserved "x-acemq-" namespace and would be dropped on consume; use a namespace of your own, such as x-yourcompany-`
}

// reservedHeaderError is the contract §8.6 error for a reserved name.
func reservedHeaderError(name string) error { return &ReservedHeaderError{Name: name} }

// clone copies the envelope with its own headers map (room for extra more
// entries) and its own Route slice, so the copy can be changed freely.
func (e Envelope) clone(extra int) Envelope {
	c := e
	c.headers = make(map[string]any, len(e.headers)+extra)
	maps.Copy(c.headers, e.headers)
	if e.Route != nil {
		c.Route = append(make([]string, 0, len(e.Route)), e.Route...)
	}
	return c
}

// nowMillis is the current time in UTC at wire (millisecond) precision.
func nowMillis() time.Time { return time.UnixMilli(time.Now().UnixMilli()).UTC() }

// newUUID returns a random UUID v4, lowercase and hyphenated.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	var out [36]byte
	formatUUID(&out, &b)
	return string(out[:])
}

// formatUUID writes the random bytes b as a UUID v4 into out.
func formatUUID(out *[36]byte, b *[16]byte) {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexdigits = "0123456789abcdef"
	j := 0
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j] = hexdigits[x>>4]
		out[j+1] = hexdigits[x&0x0f]
		j += 2
	}
}

// uuidChunk is how many ids an idBatch makes per allocation: a kept id
// keeps its chunk (64 × 36 bytes) alive, a small price for one allocation
// and one read of random bytes per 64 ids instead of one each.
const uuidChunk = 64

// idBatch hands out fresh UUID v4 strings for the members of one SendAll,
// cut from one string per uuidChunk ids. The zero value is ready; it is
// not safe for concurrent use.
type idBatch struct {
	s string // unused ids, 36 bytes each
}

func (ib *idBatch) next() string {
	if len(ib.s) == 0 {
		var raw [uuidChunk * 16]byte
		_, _ = rand.Read(raw[:]) // never fails, as in newUUID
		var out [uuidChunk * 36]byte
		for i := 0; i < uuidChunk; i++ {
			formatUUID((*[36]byte)(out[i*36:]), (*[16]byte)(raw[i*16:]))
		}
		ib.s = string(out[:])
	}
	id := ib.s[:36]
	ib.s = ib.s[36:]
	return id
}
