//go:build !unix

package drill

import "errors"

// signalBroker is unix-only: the drill stops the broker with SIGSTOP.
func signalBroker(int, bool) error {
	return errors.New("acemq: the stall drill stops the broker's process with SIGSTOP, which this system does not have")
}
