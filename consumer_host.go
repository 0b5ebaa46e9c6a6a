package acemq

import (
	"context"

	"github.com/acemq-go/acemq/transport"
)

// The Conn as its consumers' host (consumerHost): the only way a consumer
// reaches the Conn it belongs to.

func (c *Conn) consumerEnv() consumerEnv {
	return consumerEnv{
		logger:           c.logger,
		tel:              c.tel,
		recoveryInterval: c.cfg.recoveryInterval,
		recoveryMax:      c.cfg.recoveryMax,
	}
}

// hop publishes a library hop: mandatory, confirmed whatever the confirm
// setting, waiting out a block or a recovery within ctx.
func (c *Conn) hop(ctx context.Context, msg *transport.Message) error {
	msg.Mandatory = true
	return c.pub.hop(ctx, msg)
}

func (c *Conn) connection() (uint64, bool) {
	gen := c.links.generation()
	return gen, c.life.current() == StateOpen
}

func (c *Conn) settled(s Settlement) {
	c.stats.consumed.Add(1)
	for _, h := range c.cfg.settlementHooks {
		h(s)
	}
}

func (c *Conn) fellBack(f Fallback) {
	c.tel.fallback(f)
	for _, h := range c.cfg.fallbackHooks {
		h(f)
	}
}

func (c *Conn) deadLettering(queue string) bool { return c.decls.withDeadLettering(queue) }

func (c *Conn) left(k *consumerCore) { c.consumers.remove(k) }
