package outbox

import (
	"testing"

	"go.uber.org/goleak"
)

// Every relay goroutine (sweeper, listener) must be gone once the tests
// closed their relays, connections and databases.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}
