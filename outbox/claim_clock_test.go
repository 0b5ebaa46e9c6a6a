package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/acemq-go/acemq/sqlstore"
)

func TestTheClaimsNowIsTheDialectsNow(t *testing.T) {
	if pgNow != sqlstore.PostgreSQL.NowMillis() || mysqlNow != sqlstore.MySQL.NowMillis() {
		t.Fatal("the claim's now expressions differ from sqlstore's")
	}
}

// skewedClock is a host's clock that runs ahead of the others'.
func skewedClock(by time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(by) }
}

// A relay whose host clock runs ahead used to claim while another relay
// still held its records and wrote them: it compared the other's
// locked_until with its own clock, so more than a quarter of the lease
// ahead it claimed while the holder still wrote (up to three quarters of
// the lease on the holder's clock), and a full lease ahead (here two
// minutes, the lease being 60 s) at once. Leases are written and compared
// on the database's clock: it claims nothing until the holder's lease
// expired by that clock.
func TestARelayWhoseClockIsAheadClaimsNothingAnotherHolds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b)
		c, _ := memConn(t, "orders")
		add(t, s, c, "", "orders", order{"a", 1}, order{"b", 2})
		holder := ownerOf(t, s, "holder")
		if recs, _, err := holder.claim(ctx, 100, nil, nil); err != nil || len(recs) != 2 {
			t.Fatalf("holder claimed %d (%v)", len(recs), err)
		}
		// The other relay's process: same database, its clock 2 min ahead.
		ahead, err := NewStore(s.DB(), s.Dialect())
		if err != nil {
			t.Fatal(err)
		}
		ahead.now = skewedClock(2 * time.Minute)
		other := ownerOf(t, ahead, "ahead")
		if recs, _, err := other.claim(ctx, 100, nil, nil); err != nil || len(recs) != 0 {
			t.Fatalf("a relay whose clock is ahead claimed %d records another holds (%v)", len(recs), err)
		}
		p, _ := s.Pending(ctx, 0)
		if len(p) != 2 || p[0].LockedBy != "holder" {
			t.Fatalf("records %+v", p)
		}
		// locked_until is the database's time plus the lease.
		if d := time.Until(p[0].LockedUntil); d < 50*time.Second || d > 70*time.Second {
			t.Fatalf("locked_until %v is %v from now, want about the 60 s lease", p[0].LockedUntil, d)
		}
	})
}
