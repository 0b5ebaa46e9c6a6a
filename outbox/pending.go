package outbox

import (
	"context"
	"fmt"
)

// Pending reports how many records the relay's outbox still holds to
// publish (retired records aside: they wait for a person), and what they
// are, in the shape of acemqtest's Tracker: give the relay to
// Harness.Track and Settle waits until it has published everything, its
// polls and back-offs passing in virtual time. Safe for concurrent use.
func (r *Relay) Pending(ctx context.Context) (n int, what string, err error) {
	s := r.store
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM acemq_outbox WHERE attempts < ?`), MaxAttempts).Scan(&n); err != nil {
		return 0, "", fmt.Errorf("acemq: cannot count the pending outbox records: %w", err)
	}
	return n, fmt.Sprintf("outbox records relay %s has not published yet", r.cfg.id), nil
}
