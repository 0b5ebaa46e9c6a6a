package console

import "time"

// SetBrowseHook runs hook after each message a browse reads while the
// console holds the queue (tests only).
func (c *Console) SetBrowseHook(hook func(queue string, read int)) { c.browseHook = hook }

// DecodeBody exposes decodeBody's kind and text to tests.
func DecodeBody(contentType string, b []byte) (kind, text string) {
	d := decodeBody(contentType, b)
	return d.Kind, d.Text
}

// ReasonGroup exposes reasonGroup to tests.
func ReasonGroup(reason string) string { return reasonGroup(reason) }

// SetHoldHook runs hook just before the console waits for a queue (tests only).
func (c *Console) SetHoldHook(hook func(queue string)) { c.holdHook = hook }

// SetClock replaces the clock sessions expire by (tests only).
func (c *Console) SetClock(now func() time.Time) { c.sessions.now = now }
