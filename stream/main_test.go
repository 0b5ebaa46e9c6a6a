package stream

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashRole) == "reader" { // a reader process of the crash test
		os.Exit(runCrashReader())
	}
	goleak.VerifyTestMain(m)
}
