package replay

// SetBrowseWindow makes Browse subscribe for at most n messages at a time
// until the returned func restores the default (tests: several windows
// from a queue of a few thousand).
func SetBrowseWindow(n int) (restore func()) {
	old := maxWindow
	maxWindow = n
	return func() { maxWindow = old }
}
