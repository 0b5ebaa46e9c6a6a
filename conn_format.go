package acemq

import (
	"fmt"
	"log/slog"
)

// String describes the Conn for people: its transport, its URL with the
// password masked (amqp://app:***@host) and its state. No fmt verb, slog
// handler or JSON encoding of a Conn shows a password.
func (c *Conn) String() string {
	if c == nil || c.links == nil {
		return "acemq.Conn(not connected)"
	}
	return fmt.Sprintf("acemq.Conn(%s %s, %s)", c.links.driver.Name(), c.links.redacted, c.State())
}

// Format makes every fmt verb (%v, %+v, %#v, %s) print String, so a Conn
// printed whole never dumps its configuration.
func (c *Conn) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue is String, for slog.
func (c *Conn) LogValue() slog.Value { return slog.StringValue(c.String()) }
