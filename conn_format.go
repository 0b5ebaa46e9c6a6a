package acemq

import (
	"fmt"
	"log/slog"
)

// describe describes the Conn for people: its transport, its URL with
// the password masked (amqp://app:***@host) and its state. No fmt verb,
// slog handler or JSON encoding of a Conn shows a password.
func (c *Conn) describe() string {
	if c == nil || c.links == nil {
		return "acemq.Conn(not connected)"
	}
	return fmt.Sprintf("acemq.Conn(%s %s, %s)", c.links.driver.Name(), c.links.redacted, c.State())
}

// Format makes every fmt verb (%v, %+v, %#v, %s) print the Conn's
// description for people: its transport, its URL with the password masked
// (amqp://app:***@host) and its state ("acemq.Conn(rabbitmq
// amqp://app:***@host:5672, open)"), so a Conn printed whole never dumps
// its configuration. fmt.Sprint(c) gives the description as a string.
func (c *Conn) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.describe())) }

// LogValue is the description Format prints, for slog.
func (c *Conn) LogValue() slog.Value { return slog.StringValue(c.describe()) }
