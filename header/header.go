// Package header names the AceMQ wire contract's message headers (contract
// §1): the reserved x-acemq- envelope headers the library writes and reads,
// the acemq- application headers of the patterns (request-reply, routing
// slips, replay), and the limits the Go AMQP client can read. A service
// reads envelopes through acemq.Envelope and never needs these names;
// tooling that reads or writes raw messages (replay, the console, the
// command line, a bridge to another client library) does.
//
// The manual's page on the wire contract: https://github.com/acemq-go/acemq/blob/main/docs/wire-contract.md
package header

import "github.com/acemq-go/acemq/internal/wire"

// The reserved envelope headers (contract §1.1, §1.3). An application cannot
// set a header under ReservedPrefix: a send that tries fails with the
// contract error.
const (
	ID            = "x-acemq-id"
	Type          = "x-acemq-type"
	Version       = "x-acemq-version"
	Correlation   = "x-acemq-correlation"
	Causation     = "x-acemq-causation"
	Attempt       = "x-acemq-attempt"
	FirstSeen     = "x-acemq-first-seen"
	Origin        = "x-acemq-origin"
	Error         = "x-acemq-error"
	Claim         = "x-acemq-claim"
	Route         = "x-acemq-route"
	RoutePosition = "x-acemq-route-position"
	RouteID       = "x-acemq-route-id"

	// ReservedPrefix is the namespace only the library writes.
	ReservedPrefix = "x-acemq-"
)

// The patterns' application headers (contract §8).
const (
	ReplyTo      = "acemq-reply-to"
	ReplyError   = "acemq-error"
	RoutingSlip  = "acemq-routing-slip"
	ReplayedFrom = "acemq-replayed-from"
	ReplayedAt   = "acemq-replayed-at"
	ReplayCount  = "acemq-replay-count"
)

// Header limits of the Go AMQP client (amqp091-go): it cannot read a
// message whose headers nest tables or arrays more than MaxDepth levels
// deep (a table-valued header is one level) or hold more than MaxEntries
// entries in one table or array, and it closes the whole consuming
// connection when one is delivered. The library refuses to publish such
// headers (acemq.ErrHeaderLimit).
const (
	MaxDepth   = wire.MaxDepth
	MaxEntries = wire.MaxEntries
)
