package acemq

// EventPipelineRunFinished is raised by package pipeline when a run ends,
// completed or ended early (behaviour §7.6). Event.Fields holds pipeline,
// step, outcome (completed or ended_early) and route_id.
const EventPipelineRunFinished EventKind = "pipeline.run_finished"

// Emit hands e to the Conn's event handler (Config.OnEvent), in order
// with the Conn's own events, on the handler's goroutine. It never blocks
// and does nothing when no handler is set or the Conn is closed; a zero
// At becomes now. It lets packages built over the Conn (pipeline) raise
// their events through the one handler. Safe for concurrent use.
func (c *Conn) Emit(e Event) { c.events.emit(e) }
