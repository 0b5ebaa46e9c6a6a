package acemqtest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: a
// harness closes everything it started before its bubble ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
