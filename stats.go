package acemq

import (
	"sync/atomic"
	"time"
)

// counters are a Conn's cumulative counters, the ones the standing-load
// line reports (Conn.Stats). They are safe for concurrent use.
type counters struct {
	published  atomic.Int64
	confirmed  atomic.Int64
	failed     atomic.Int64
	refused    atomic.Int64
	unroutable atomic.Int64
	consumed   atomic.Int64
}

// StatsSnapshot is a point-in-time copy of the counters.
type StatsSnapshot struct {
	// Published counts application sends attempted.
	Published int64
	// Confirmed counts sends confirmed (or written, with confirms off).
	Confirmed int64
	// Failed counts sends that may have been lost (not refusals).
	Failed int64
	// Refused counts sends declined before anything was written.
	Refused int64
	// Unroutable counts mandatory sends the broker returned.
	Unroutable int64
	// Consumed counts deliveries settled by consumers.
	Consumed int64
	// Outstanding is how many confirmed publishes were waiting for the
	// broker's answer at At. Pinned at Config.MaxOutstandingPublishes it
	// means the broker stopped answering.
	Outstanding int
	At          time.Time
}

// Stats returns a snapshot of the Conn's counters.
func (c *Conn) Stats() StatsSnapshot {
	s := &c.stats
	return StatsSnapshot{
		Published:   s.published.Load(),
		Confirmed:   s.confirmed.Load(),
		Failed:      s.failed.Load(),
		Refused:     s.refused.Load(),
		Unroutable:  s.unroutable.Load(),
		Consumed:    s.consumed.Load(),
		Outstanding: c.pub.permits.outstanding(),
		At:          time.Now(),
	}
}

// PublishReport describes one application publish's outcome, for hooks.
type PublishReport struct {
	Exchange    string
	RoutingKey  string
	MessageType string
	// Outcome is confirmed, published, unroutable, refused or failed.
	Outcome  Outcome
	Duration time.Duration
	Envelope Envelope
	Err      error
}
