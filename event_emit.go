package acemq

// Emit hands e to the Conn's event handler (Config.OnEvent), in order with
// the Conn's own events, stamping At with the current time when it is
// zero. Packages built over a Conn raise their events this way (the
// pipeline's EventRunFinished). Emit is safe for concurrent use and never
// blocks: it does nothing when no handler is set or the Conn is closed.
func (c *Conn) Emit(e Event) { c.events.emit(e) }
