package memory

import (
	"crypto/rand"
	"encoding/base64"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq-go/acemq/transport"
)

// Broker is one named in-process broker. Get one with Lookup; connect to it
// with a memory://NAME URL. All of its methods are safe for concurrent use.
type Broker struct {
	name  string
	epoch time.Time // monotonic origin for expiry times

	// mu is the topology lock: exchanges, queues and bindings. Publishing
	// holds it for reading; declarations and deletions for writing.
	// Lock order: mu, then a queue's mu, then a channel's mu.
	mu        sync.RWMutex
	exchanges map[string]*exchange
	queues    map[string]*queue

	connMu sync.Mutex
	conns  map[*conn]struct{}

	// Fault injection.
	alarmMu     sync.Mutex // serialises Block/Unblock and the OnBlocked callbacks
	blocked     atomic.Bool
	blockReason string // guarded by alarmMu
	nackNext    atomic.Int64
	withhold    atomic.Bool
	dropAt      atomic.Int64 // see DropConnectionsAtPublish; 0: none armed
	dropRouted  atomic.Bool  // the armed drop routes its publish first

	watch watchers // see Watch

	// dlxRetry is how long a retained at-least-once dead letter waits
	// before it is routed again, in nanoseconds; 0 is the default.
	dlxRetry atomic.Int64

	// flow is set when a consumed queue's backlog passes flowThreshold;
	// the next publish clears it and yields (see publisher.Publish).
	flow atomic.Bool
}

func newBroker(name string) *Broker {
	b := &Broker{
		name: name, epoch: time.Now(),
		exchanges: map[string]*exchange{},
		queues:    map[string]*queue{},
		conns:     map[*conn]struct{}{},
	}
	b.exchanges[""] = newExchange(transport.ExchangeSpec{Kind: transport.Direct, Durable: true})
	for _, k := range []transport.ExchangeKind{transport.Direct, transport.Topic, transport.Fanout, transport.Headers} {
		b.exchanges["amq."+string(k)] = newExchange(transport.ExchangeSpec{Name: "amq." + string(k), Kind: k, Durable: true})
	}
	return b
}

// Name returns the name the broker is registered under.
func (b *Broker) Name() string { return b.name }

// now is the broker's monotonic clock in nanoseconds.
func (b *Broker) now() int64 { return int64(time.Since(b.epoch)) }

// Connections returns how many connections are open to the broker.
func (b *Broker) Connections() int {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	return len(b.conns)
}

// QueueInfo reports a queue's ready messages and consumers; ok is false
// when no such queue exists. It never opens a channel or disturbs the
// queue's owner.
func (b *Broker) QueueInfo(name string) (info transport.QueueInfo, ok bool) {
	b.mu.RLock()
	q := b.queues[name]
	b.mu.RUnlock()
	if q == nil {
		return transport.QueueInfo{}, false
	}
	return q.info(), true
}

func (b *Broker) snapshotConns() []*conn {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	out := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		out = append(out, c)
	}
	return out
}

// publishResult is what routing one message did.
type publishResult struct {
	routed   bool // reached at least one queue
	rejected bool // a full reject-publish queue refused it
	// queues names the queues reached, only when the broker is watched.
	queues []string
}

// publish routes m through its exchange. It returns a channel error when
// the exchange does not exist or is internal.
func (b *Broker) publish(m *message, scratch []*queue) (publishResult, []*queue, *transport.Error) {
	var res publishResult
	b.mu.RLock()
	dst := scratch[:0]
	if m.exchange == "" {
		if q := b.queues[m.routingKey]; q != nil {
			dst = append(dst, q)
		}
	} else {
		x := b.exchanges[m.exchange]
		if x == nil {
			b.mu.RUnlock()
			return res, dst, errNoExchange(m.exchange)
		}
		if x.internal {
			b.mu.RUnlock()
			return res, dst, chanErr(transport.CodeAccessRefused, "ACCESS_REFUSED", "cannot publish to internal exchange '%s' in vhost '/'", m.exchange)
		}
		dst = x.route(m, dst)
	}
	var dead []deadLetter
	for _, q := range dst {
		ok, d := q.enqueue(m)
		if dead == nil {
			dead = d // one queue's letters need no copy
		} else {
			dead = append(dead, d...)
		}
		res.routed = true
		if !ok {
			res.rejected = true
		}
	}
	if b.watched() {
		res.queues = queueNames(dst)
	}
	b.mu.RUnlock()
	if len(dead) > 0 {
		b.deadLetter(dead)
	}
	for i := range dst {
		dst[i] = nil
	}
	return res, dst, nil
}

// genName returns a server-generated name with RabbitMQ's shape.
func genName(prefix string) string {
	var buf [16]byte
	_, _ = rand.Read(buf[:])
	return prefix + base64.RawURLEncoding.EncodeToString(buf[:])
}

// Queues returns the names of every queue the broker holds, sorted. It is
// what the acemq command's `dlq list` reads for a memory:// URL (AMQP
// itself cannot list queues). Safe for concurrent use.
func (b *Broker) Queues() []string {
	b.mu.RLock()
	names := make([]string, 0, len(b.queues))
	for n := range b.queues {
		names = append(names, n)
	}
	b.mu.RUnlock()
	sort.Strings(names)
	return names
}
