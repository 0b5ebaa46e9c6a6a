package acemq

// Forget stops re-declaring t's exchanges, queues and bindings after a
// recovery. It changes nothing on the broker: delete what should go with
// DeleteQueue. Use it when a short-lived entity (a requester's reply queue)
// is done with, so recoveries do not resurrect it.
func (c *Conn) Forget(t *Topology) {
	drop := map[string]bool{}
	for _, d := range t.Declarations() {
		drop[declKey(d)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.decls[:0]
	for _, d := range c.decls {
		k := declKey(d)
		if drop[k] {
			delete(c.declKeys, k)
			continue
		}
		kept = append(kept, d)
	}
	c.decls = kept
}
