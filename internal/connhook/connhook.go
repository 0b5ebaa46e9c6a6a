// Package connhook reaches parts of *acemq.Conn that the packages built
// over it need and an application does not, without an exported name in
// package acemq. Package acemq sets the functions in an init func; a
// program that links this package with a *Conn to pass links acemq, so
// they are set before any caller runs.
package connhook

// Emit hands e (an acemq.Event) to conn's (a *acemq.Conn) event handler,
// in order with the Conn's own events; see acemq.Config.OnEvent. It never
// blocks and does nothing when no handler is set or the Conn is closed.
var Emit func(conn, e any)

// Capabilities lists the capabilities of conn's (a *acemq.Conn) transport
// driver, such as "quorum-queues" or "streams".
var Capabilities func(conn any) []string
