package saga

import (
	"context"
	"fmt"
)

// Pending reports how many saga instances are not at an end yet (running
// or compensating, on any runner sharing the database; unresolved ones
// wait for a person and do not count), in the shape of acemqtest's
// Tracker: give the runner to Harness.Track and Settle waits until a sweep
// has carried every instance to its end, leases, renewals and step
// timeouts passing in virtual time (give the runner
// WithClock(acemqtest.Clock{}) so its leases do too). Safe for concurrent
// use.
func (r *Runner) Pending(ctx context.Context) (n int, what string, err error) {
	q := r.d.Rebind(`SELECT COUNT(*) FROM acemq_saga WHERE status IN (?, ?)`)
	if err := r.db.QueryRowContext(ctx, q, StatusRunning, StatusCompensating).Scan(&n); err != nil {
		return 0, "", fmt.Errorf("acemq: cannot count the saga instances still running: %w", err)
	}
	return n, "saga instances running or compensating", nil
}
