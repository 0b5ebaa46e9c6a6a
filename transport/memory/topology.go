package memory

import (
	"strings"

	"github.com/acemq-go/acemq/transport"
)

// declareExchange creates an exchange or checks an existing one is
// equivalent, with RabbitMQ's codes: 403 for the default exchange and new
// amq.* names, 404 for a passive miss, 406 for a different declaration.
func (b *Broker) declareExchange(spec transport.ExchangeSpec) *transport.Error {
	if spec.Name == "" {
		return errDefaultExchange()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.exchanges[spec.Name]
	if x == nil {
		if spec.Passive {
			return errNoExchange(spec.Name)
		}
		if strings.HasPrefix(spec.Name, "amq.") {
			return errReserved("exchange", spec.Name)
		}
		switch spec.Kind {
		case transport.Direct, transport.Topic, transport.Fanout, transport.Headers:
		default:
			return &transport.Error{Code: 503, Reason: "COMMAND_INVALID - unknown exchange type '" + string(spec.Kind) + "'", Server: true, Connection: true}
		}
		b.exchanges[spec.Name] = newExchange(spec)
		return nil
	}
	if spec.Passive {
		return nil
	}
	switch {
	case x.kind != spec.Kind:
		return errInequivalent("type", "exchange", spec.Name, "'"+string(spec.Kind)+"'", "'"+string(x.kind)+"'")
	case x.durable != spec.Durable:
		return errInequivalent("durable", "exchange", spec.Name, quoteBool(spec.Durable), quoteBool(x.durable))
	case x.autoDelete != spec.AutoDelete:
		return errInequivalent("auto_delete", "exchange", spec.Name, quoteBool(spec.AutoDelete), quoteBool(x.autoDelete))
	case x.internal != spec.Internal:
		return errInequivalent("internal", "exchange", spec.Name, quoteBool(spec.Internal), quoteBool(x.internal))
	}
	return nil
}

func (b *Broker) deleteExchange(name string) *transport.Error {
	if name == "" {
		return errDefaultExchange()
	}
	if strings.HasPrefix(name, "amq.") {
		return chanErr(transport.CodeAccessRefused, "ACCESS_REFUSED", "deletion of system exchange '%s' in vhost '/' not allowed", name)
	}
	b.mu.Lock()
	delete(b.exchanges, name)
	b.mu.Unlock()
	return nil
}

// declareQueue creates a queue or checks an existing one is equivalent.
func (b *Broker) declareQueue(spec transport.QueueSpec, owner *conn) (transport.QueueInfo, *transport.Error) {
	if spec.Name == "" && !spec.Passive {
		spec.Name = genName("amq.gen-")
	} else if strings.HasPrefix(spec.Name, "amq.") && !spec.Passive {
		return transport.QueueInfo{}, errReserved("queue", spec.Name)
	}
	b.mu.Lock()
	q := b.queues[spec.Name]
	if q != nil {
		b.mu.Unlock()
		if q.exclusive && q.owner != owner {
			return transport.QueueInfo{}, errLocked(spec.Name)
		}
		if !spec.Passive {
			if e := checkQueueEquivalent(q, spec); e != nil {
				return transport.QueueInfo{}, e
			}
		}
		return q.info(), nil
	}
	if spec.Passive {
		b.mu.Unlock()
		return transport.QueueInfo{}, errNoQueue(spec.Name)
	}
	if e := validateQueue(spec); e != nil {
		b.mu.Unlock()
		return transport.QueueInfo{}, e
	}
	q = newQueue(b, spec, owner)
	b.queues[spec.Name] = q
	b.mu.Unlock()
	return transport.QueueInfo{Name: spec.Name}, nil
}

func checkQueueEquivalent(q *queue, spec transport.QueueSpec) *transport.Error {
	switch {
	case q.exclusive != spec.Exclusive:
		return errLocked(spec.Name)
	case q.durable != spec.Durable && !q.exclusive: // RabbitMQ ignores durable on exclusive queues
		return errInequivalent("durable", "queue", spec.Name, quoteBool(spec.Durable), quoteBool(q.durable))
	case q.autoDelete != spec.AutoDelete:
		return errInequivalent("auto_delete", "queue", spec.Name, quoteBool(spec.AutoDelete), quoteBool(q.autoDelete))
	}
	return compareQueueArgs(spec.Name, spec.Args, q.args)
}

// validateQueue refuses what RabbitMQ 4.x refuses for a new queue.
func validateQueue(spec transport.QueueSpec) *transport.Error {
	invalid := func(arg string) *transport.Error {
		return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "invalid arg '%s' for queue '%s' in vhost '/'", arg, spec.Name)
	}
	if e := validateSingleActive(spec.Name, queueType(spec.Args), spec.Args); e != nil {
		return e
	}
	switch queueType(spec.Args) {
	case "classic":
	case "quorum":
		if spec.Exclusive || spec.AutoDelete || !spec.Durable {
			return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED",
				"invalid property 'exclusive', 'auto-delete' or 'non-durable' for quorum queue '%s' in vhost '/'", spec.Name)
		}
	case "stream":
		return validateStream(spec)
	default:
		return invalid("x-queue-type")
	}
	for _, k := range []string{"x-message-ttl", "x-max-length"} {
		if v, ok := spec.Args[k]; ok {
			if n, isInt := toInt64(v); !isInt || n < 0 {
				return invalid(k)
			}
		}
	}
	if v, ok := spec.Args["x-overflow"]; ok && v != "drop-head" && v != "reject-publish" {
		return invalid("x-overflow")
	}
	if v, ok := spec.Args["x-dead-letter-strategy"]; ok && v != "at-most-once" && v != "at-least-once" {
		return chanErr(transport.CodePreconditionFailed, "PRECONDITION_FAILED", "invalid arg 'x-dead-letter-strategy' for queue '%s' in vhost '/': invalid_dlx_strategy", spec.Name)
	}
	for _, k := range []string{"x-dead-letter-exchange", "x-dead-letter-routing-key"} {
		if v, ok := spec.Args[k]; ok {
			if _, isStr := v.(string); !isStr {
				return invalid(k)
			}
		}
	}
	if !spec.Durable && !spec.Exclusive {
		return errTransientQueue(spec.Name)
	}
	return nil
}

// usableQueue finds a queue this connection may use: 404 when missing,
// 405 when it is another connection's exclusive queue.
func (b *Broker) usableQueue(name string, c *conn) (*queue, *transport.Error) {
	b.mu.RLock()
	q := b.queues[name]
	b.mu.RUnlock()
	if q == nil {
		return nil, errNoQueue(name)
	}
	if q.exclusive && q.owner != c {
		return nil, errLocked(name)
	}
	return q, nil
}

// deleteQueue removes a queue, its bindings and its consumers.
func (b *Broker) deleteQueue(name string, c *conn) (int, *transport.Error) {
	return b.deleteQueueChecked(name, c, nil)
}

// deleteQueueChecked is deleteQueue with a check (when not nil) that may
// refuse, made under b.mu after the queue's exclusivity (if-empty).
func (b *Broker) deleteQueueChecked(name string, c *conn, check func(*queue) *transport.Error) (int, *transport.Error) {
	b.mu.Lock()
	q := b.queues[name]
	if q == nil {
		b.mu.Unlock()
		return 0, nil
	}
	if q.exclusive && q.owner != c {
		b.mu.Unlock()
		return 0, errLocked(name)
	}
	if check != nil {
		if e := check(q); e != nil {
			b.mu.Unlock()
			return 0, e
		}
	}
	n, cs := b.removeLocked(q)
	b.mu.Unlock()
	stopConsumers(cs)
	return n, nil
}

// removeLocked unregisters q; the caller holds b.mu and stops the returned
// consumers after unlocking.
func (b *Broker) removeLocked(q *queue) (int, []*consumer) {
	if b.queues[q.name] != q {
		return 0, nil
	}
	delete(b.queues, q.name)
	for _, x := range b.exchanges {
		x.unbindQueue(q)
	}
	return q.markDeleted()
}

// stopConsumers ends subscriptions to a deleted queue: their delivery
// channels close, as on a server-sent basic.cancel.
func stopConsumers(cs []*consumer) {
	for _, c := range cs {
		c.ch.mu.Lock()
		if c.ch.consumers[c.tag] == c {
			delete(c.ch.consumers, c.tag)
		}
		c.ch.mu.Unlock()
		c.halt()
	}
}

// deleteIfUnused deletes an auto-delete queue whose last consumer left.
func (b *Broker) deleteIfUnused(q *queue) {
	b.mu.Lock()
	q.mu.Lock()
	gone := q.autoDelete && q.hadConsumer && len(q.consumers) == 0
	q.mu.Unlock()
	var cs []*consumer
	if gone {
		_, cs = b.removeLocked(q)
	}
	b.mu.Unlock()
	stopConsumers(cs)
}

// dropOwned deletes the exclusive queues of a closing connection.
func (b *Broker) dropOwned(c *conn) {
	b.mu.Lock()
	var cs []*consumer
	for _, q := range b.queues {
		if q.exclusive && q.owner == c {
			_, more := b.removeLocked(q)
			cs = append(cs, more...)
		}
	}
	b.mu.Unlock()
	stopConsumers(cs)
}

// bind adds (or, when add is false, removes) a binding.
func (b *Broker) bind(spec transport.BindingSpec, c *conn, add bool) *transport.Error {
	if spec.Exchange == "" {
		return errDefaultExchange()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.exchanges[spec.Exchange]
	if x == nil {
		return errNoExchange(spec.Exchange)
	}
	q := b.queues[spec.Queue]
	if q == nil {
		return errNoQueue(spec.Queue)
	}
	if q.exclusive && q.owner != c {
		return errLocked(spec.Queue)
	}
	if add {
		x.bind(q, spec.RoutingKey, spec.Args)
	} else {
		x.unbind(q, spec.RoutingKey, spec.Args)
	}
	return nil
}
