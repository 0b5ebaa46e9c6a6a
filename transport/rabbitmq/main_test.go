package rabbitmq

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any goroutine outlives the tests: every
// watcher, dispatcher and forwarder must end with its connection or channel.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
