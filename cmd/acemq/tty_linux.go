package main

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// isTTY reports whether w is a terminal: a file the terminal ioctl
// (TCGETS) answers for, so /dev/null, a character device, is not one.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
