package yaml_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a consumer started by a test outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
