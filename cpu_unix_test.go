//go:build unix

package acemq_test

import "syscall"

// processCPU is the CPU time the process has used (user and system, every
// thread: the publisher, the broker's goroutines, a span processor's, the
// garbage collector), in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
