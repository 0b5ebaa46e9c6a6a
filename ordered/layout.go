// Package ordered keeps per-key order across partitions (behaviour §7.10,
// contract §3.9).
//
// Messages are spread over partitions by key: the partition of a key is
// the FNV-1a 32-bit hash of its UTF-8 bytes reduced with Java's signed
// floorMod, so a Java, Python or Go publisher puts a key in the same
// partition. Each partition is a quorum queue {name}.p{n} bound to the
// direct exchange {name} on key p{n}; one consumer per partition keeps
// the partition's order, and with it every key's.
//
// The manual's page on ordered processing: https://github.com/acemq-go/acemq/blob/main/docs/ordered.md
package ordered

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport"
)

// DefaultPartitions is the family's default partition count.
const DefaultPartitions = 8

// Partition returns the partition of key among n (n ≥ 1): FNV-1a 32-bit
// over the key's UTF-8 bytes, taken as a signed 32-bit integer and reduced
// with Java's floorMod, so the result is in [0, n) and equals what the
// Java library computes. It differs from an unsigned hash % n for about
// half of all keys when n is not a power of two. It panics if n < 1.
func Partition(key string, n int) int {
	if n < 1 {
		panic("ordered: Partition needs n >= 1, got " + strconv.Itoa(n))
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	signed := int64(int32(h.Sum32()))
	m := signed % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}

// Queue is the name of partition p of the ordered stream name: {name}.p{p}.
func Queue(name string, p int) string { return name + ".p" + strconv.Itoa(p) }

// RoutingKey routes to partition p: p{p}.
func RoutingKey(p int) string { return "p" + strconv.Itoa(p) }

// TopologyOption adjusts Topology.
type TopologyOption func(*topologyConfig)

type topologyConfig struct{ singleActive bool }

// SingleActiveConsumer declares the partition queues with
// x-single-active-consumer, so two instances of a service can both
// consume every partition and the broker lets only one of them at a time
// receive from each: order holds across processes, and the other takes
// over when the active one dies.
//
// The contract's partition queues carry no arguments (§3.4), so a queue
// declared with this option is inequivalent to a peer's declaration of
// the same queue (the broker answers PRECONDITION_FAILED to whichever
// declares second). Use it only where every declarer uses it.
func SingleActiveConsumer() TopologyOption {
	return func(c *topologyConfig) { c.singleActive = true }
}

// Topology declares the ordered stream name with partitions partitions:
// the direct exchange name, the quorum queues name.p0 … and their
// bindings on p0 …. partitions below 1 is an *acemq.ConfigurationError.
func Topology(name string, partitions int, opts ...TopologyOption) (*acemq.Topology, error) {
	var cfg topologyConfig
	for _, o := range opts {
		o(&cfg)
	}
	if partitions < 1 {
		return nil, partitionsError(partitions)
	}
	t := acemq.NewTopology().Exchange(name, acemq.Direct, acemq.ExchangeOptions{})
	for p := range partitions {
		q := Queue(name, p)
		qo := acemq.QueueOptions{Type: acemq.Quorum}
		if cfg.singleActive {
			qo.Args = transport.Table{"x-single-active-consumer": true}
		}
		t.Queue(q, qo).Bind(q, name, RoutingKey(p))
	}
	return t, t.Validate()
}

func partitionsError(n int) error {
	return &acemq.ConfigurationError{Option: "partitions", Reason: fmt.Sprintf("an ordered stream needs at least 1 partition, got %d; give 1 or more (the family's default is %d)", n, DefaultPartitions)}
}

// Send publishes payload to the partition of key: exchange name, routing
// key p{Partition(key, partitions)}, mandatory (a partition that does not
// exist is an unroutable error, never a silent loss). The key also rides
// in the HeaderKey header, so a consumer can serialise by it. It behaves
// as acemq.Conn.Publish otherwise.
func Send(ctx context.Context, c *acemq.Conn, name string, partitions int, key string, payload any, o acemq.SendOptions) (acemq.Sent, error) {
	if partitions < 1 {
		return acemq.Sent{}, partitionsError(partitions)
	}
	h := make(map[string]any, len(o.Headers)+1)
	for k, v := range o.Headers {
		h[k] = v
	}
	h[HeaderKey] = key
	o.Headers, o.Mandatory = h, true
	return c.Publish(ctx, name, RoutingKey(Partition(key, partitions)), payload, o)
}

// HeaderKey carries the ordering key on messages sent with Send, so a
// consumer can serialise by it.
const HeaderKey = "acemq-ordering-key"
