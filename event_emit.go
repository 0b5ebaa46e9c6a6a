package acemq

import "github.com/acemq-go/acemq/internal/connhook"

// Packages built over the Conn (pipeline raises its run events, actuator
// reports the driver's capabilities) reach it through internal/connhook:
// no exported name of this package carries them.
func init() {
	connhook.Emit = func(conn, e any) {
		if c, ok := conn.(*Conn); ok && c != nil {
			if ev, ok := e.(Event); ok {
				c.events.emit(ev)
			}
		}
	}
	connhook.Capabilities = func(conn any) []string {
		if c, ok := conn.(*Conn); ok && c != nil {
			return c.links.driver.Capabilities()
		}
		return nil
	}
}
