package outbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every relay goroutine (sweeper, listener) must be gone once the tests
// closed their relays, connections and databases.
func TestMain(m *testing.M) {
	if os.Getenv(crashRole) == "relay" { // a relay process of the crash test
		os.Exit(runCrashRelay())
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}
