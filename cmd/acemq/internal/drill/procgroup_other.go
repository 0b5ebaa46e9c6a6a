//go:build !unix

package drill

import "os/exec"

// ownGroup leaves cmd as it is where process groups are not a thing; the
// caller's WaitDelay still bounds the wait for its output.
func ownGroup(cmd *exec.Cmd) {}
