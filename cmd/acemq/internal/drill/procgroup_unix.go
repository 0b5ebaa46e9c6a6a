//go:build unix

package drill

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and makes cancelling it
// kill the whole group: rabbitmqctl is a script that starts an Erlang VM,
// which would otherwise outlive a killed parent and hold its output open.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
