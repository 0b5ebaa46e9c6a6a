package acemq

import (
	"context"

	"github.com/acemq-go/acemq/transport"
)

// ExchangeKind is an exchange type: Direct, Topic, Fanout or Headers.
type ExchangeKind = transport.ExchangeKind

// The exchange kinds.
const (
	Direct  = transport.Direct
	Topic   = transport.Topic
	Fanout  = transport.Fanout
	Headers = transport.Headers
)

// QueueType is the kind of queue a Topology declares.
type QueueType string

// Queue types.
const (
	Quorum  QueueType = "quorum"
	Classic QueueType = "classic"
	Stream  QueueType = "stream"
)

// Topology is a declarative set of exchanges, queues and bindings. Build it
// with the chaining methods (which never dial), check it with Validate,
// compare it with the broker with Conn.Plan and declare it with Conn.Apply.
// A Topology is not safe for concurrent modification.
type Topology struct {
	decls    []Declaration
	problems []string
}

// ExchangeOption adjusts an exchange declaration.
type ExchangeOption func(*transport.ExchangeSpec)

// QueueOption adjusts a queue declaration.
type QueueOption func(*queueRequest)

type queueRequest struct {
	typ           QueueType
	typeSet       bool
	exclusive     bool
	autoDelete    bool
	transient     bool
	args          transport.Table
	deliveryLimit int
	limitSet      bool
}

// DeclKind says what a Declaration declares.
type DeclKind int

// Declaration kinds.
const (
	DeclExchange DeclKind = iota + 1
	DeclQueue
	DeclBinding
)

// Declaration is one entity of a topology, in declaration order.
type Declaration struct {
	Kind     DeclKind
	Exchange transport.ExchangeSpec
	Queue    transport.QueueSpec
	// QueueType is the declared type of a queue declaration.
	QueueType QueueType
	Binding   transport.BindingSpec
	// DeclaredBy is "topology", "consumer" or "both" (fixture vocabulary).
	DeclaredBy string
}

// NewTopology returns an empty topology.
func NewTopology() *Topology { return &Topology{} }

// Exchange declares an exchange (durable unless an option says otherwise).
func (t *Topology) Exchange(name string, kind ExchangeKind, opts ...ExchangeOption) *Topology {
	panic("topology: not implemented yet")
}

// Queue declares a queue: durable quorum unless options say otherwise.
func (t *Topology) Queue(name string, opts ...QueueOption) *Topology {
	panic("topology: not implemented yet")
}

// Bind binds queue to exchange with a routing key.
func (t *Topology) Bind(queue, exchange, routingKey string) *Topology {
	panic("topology: not implemented yet")
}

// DeadLetters wires broker dead-lettering for q into acemq.dlx and adds the
// dead-letter half ({q}.dlq, {q}.parked and their bindings).
func (t *Topology) DeadLetters(q string) *Topology { panic("topology: not implemented yet") }

// Retries adds the retry ladder for q under policy: acemq.retry, one rung
// per distinct broker-held delay and the home binding.
func (t *Topology) Retries(q string, policy RetryPolicy) *Topology {
	panic("topology: not implemented yet")
}

// Validate reports every problem at once in a *TopologyError, or nil.
func (t *Topology) Validate() error { panic("topology: not implemented yet") }

// Declarations returns the entities in declaration order: exchanges, then
// queues, then bindings.
func (t *Topology) Declarations() []Declaration { panic("topology: not implemented yet") }

// Describe renders "Topology: N exchanges, N queues, N bindings" and one
// line per declaration.
func (t *Topology) Describe() string { panic("topology: not implemented yet") }

// TopologyError lists every validation problem of a topology.
type TopologyError struct {
	Problems []string
}

func (e *TopologyError) Error() string { panic("topology: not implemented yet") }

// consumerDeclarations is what a consumer of q declares at start: the
// dead-letter half always, and the ladder when policy waits in the broker.
func consumerDeclarations(q string, policy RetryPolicy) []Declaration {
	panic("topology: not implemented yet")
}

// ChannelOpener opens a fresh throwaway channel.
type ChannelOpener func(ctx context.Context) (transport.Channel, error)

// PlanStatus is the result of comparing one declaration with the broker.
type PlanStatus string

// Plan statuses.
const (
	WouldCreate PlanStatus = "would create"
	Matches     PlanStatus = "matches"
	Differs     PlanStatus = "differs"
	Unknown     PlanStatus = "unknown"
)

// PlanItem is one line of a plan.
type PlanItem struct {
	Declaration Declaration
	Status      PlanStatus
	// Detail is the broker's text for Differs, or the explanation for Unknown.
	Detail string
}

// Plan compares a topology with the broker.
type Plan struct {
	Items []PlanItem
}

// planDeclarations compares each declaration with the broker: passive check
// → would create; identical re-declare on a throwaway channel → matches,
// 406 → differs. Bindings are unknown.
func planDeclarations(ctx context.Context, open ChannelOpener, decls []Declaration) (Plan, error) {
	panic("topology: not implemented yet")
}

// applyDeclarations declares each entity on a short-lived channel, in
// order, stopping at the first refusal with an error naming the entity and
// the broker's text.
func applyDeclarations(ctx context.Context, open ChannelOpener, decls []Declaration) error {
	panic("topology: not implemented yet")
}
