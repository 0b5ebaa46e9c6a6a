package acemq

// Forget stops re-declaring t's exchanges, queues and bindings after a
// recovery. It changes nothing on the broker: delete what should go with
// DeleteQueue. Use it when a short-lived entity (a requester's reply queue)
// is done with, so recoveries do not resurrect it.
func (c *Conn) Forget(t *Topology) { c.decls.forget(t.Declarations()) }
