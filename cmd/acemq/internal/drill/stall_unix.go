//go:build unix

package drill

import (
	"fmt"
	"syscall"
)

// signalBroker stops (SIGSTOP) or resumes (SIGCONT) the broker's process.
func signalBroker(pid int, stop bool) error {
	sig, verb := syscall.SIGCONT, "resume"
	if stop {
		sig, verb = syscall.SIGSTOP, "stop"
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("acemq: cannot %s the broker's process %d: %v; the stall drill runs on the broker's machine as a user allowed to signal it", verb, pid, err)
	}
	return nil
}
