//go:build !linux

package main

import "io"

// isTTY reports whether w is a terminal. Off Linux it takes any character
// device for one (so --raw to /dev/null asks for --raw=force there).
func isTTY(w io.Writer) bool { return isTerminal(w) }
