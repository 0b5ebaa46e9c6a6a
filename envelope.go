package acemq

import (
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Wire header names (contract §1.1, §1.3).
const (
	HeaderID            = "x-acemq-id"
	HeaderType          = "x-acemq-type"
	HeaderVersion       = "x-acemq-version"
	HeaderCorrelation   = "x-acemq-correlation"
	HeaderCausation     = "x-acemq-causation"
	HeaderAttempt       = "x-acemq-attempt"
	HeaderFirstSeen     = "x-acemq-first-seen"
	HeaderOrigin        = "x-acemq-origin"
	HeaderError         = "x-acemq-error"
	HeaderClaim         = "x-acemq-claim"
	HeaderRoute         = "x-acemq-route"
	HeaderRoutePosition = "x-acemq-route-position"
	HeaderRouteID       = "x-acemq-route-id"

	HeaderReplyTo      = "acemq-reply-to"
	HeaderReplyError   = "acemq-error"
	HeaderRoutingSlip  = "acemq-routing-slip"
	HeaderReplayedFrom = "acemq-replayed-from"
	HeaderReplayedAt   = "acemq-replayed-at"
	HeaderReplayCount  = "acemq-replay-count"

	// ReservedPrefix is the engine's header namespace.
	ReservedPrefix = "x-acemq-"
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
func NewEnvelope() Envelope { panic("envelope: not implemented yet") }

// Header returns one application header.
func (e Envelope) Header(name string) (any, bool) { v, ok := e.headers[name]; return v, ok }

// Headers returns a copy of the application headers (never x-acemq-*).
func (e Envelope) Headers() map[string]any { panic("envelope: not implemented yet") }

// WithHeader returns a copy with one application header set. A name in the
// reserved x-acemq- namespace is refused with the contract error and the
// envelope is returned unchanged.
func (e Envelope) WithHeader(name string, value any) (Envelope, error) {
	panic("envelope: not implemented yet")
}

// WithHeaders returns a copy with every header in h set, silently skipping
// reserved x-acemq- names (the copy-from-incoming path).
func (e Envelope) WithHeaders(h map[string]any) Envelope { panic("envelope: not implemented yet") }

// WithoutHeader returns a copy without the named application header.
func (e Envelope) WithoutHeader(name string) Envelope { panic("envelope: not implemented yet") }

// NextAttempt returns a copy with Attempt + 1 (everything else kept).
func (e Envelope) NextAttempt() Envelope { panic("envelope: not implemented yet") }

// CausedBy returns a new message's envelope derived from parent: a fresh id,
// parent's correlation, causation = parent's id, attempt 1, first-seen now,
// this envelope's type, version and headers.
func (e Envelope) CausedBy(parent Envelope) Envelope { panic("envelope: not implemented yet") }

// Validate reports an envelope that cannot be sent: version or attempt
// below 1, or a malformed route.
func (e Envelope) Validate() error { panic("envelope: not implemented yet") }

// readEnvelope applies the contract's tolerant read rules to a delivery's
// headers and properties. It never fails.
func readEnvelope(headers transport.Table, routingKey, messageID, replyTo string) Envelope {
	panic("envelope: not implemented yet")
}

// render writes the engine headers (always id, type, version, correlation,
// attempt, first-seen, origin; the rest when non-empty) and the
// application headers into a new table.
func (e Envelope) render() transport.Table { panic("envelope: not implemented yet") }

// reservedHeaderError is the contract §8.6 error for a reserved name.
func reservedHeaderError(name string) error { panic("envelope: not implemented yet") }
