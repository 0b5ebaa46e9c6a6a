package ordered

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the killed consumer's child process when
// TestAKilledConsumerProcessHandsOverAndKeepsEachKeysOrder re-executes
// this test binary, and otherwise the tests, failing the package when a
// goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
