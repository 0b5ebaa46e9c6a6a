package replay

import "time"

// SetBrowseWindow makes Browse subscribe for at most n messages at a time
// until the returned func restores the default (tests: several windows
// from a queue of a few thousand).
func SetBrowseWindow(n int) (restore func()) {
	old := maxWindow
	maxWindow = n
	return func() { maxWindow = old }
}

// SetBrowseStall makes Browse give up after d without a delivery while
// messages are ready, until the returned func restores the default.
func SetBrowseStall(d time.Duration) (restore func()) {
	old := stalledAfter
	stalledAfter = d
	return func() { stalledAfter = old }
}
