package acemq

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

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
	decls       []Declaration
	problems    []string
	deadLetters []string
	retries     []string
	// policies are the Retries calls, in order: where each queue's waits
	// are held (topology_retry.go).
	policies []queuePolicy
}

// ExchangeOptions adjusts an exchange declaration. The zero value
// declares a durable exchange that is never deleted on its own; its fields
// have the names and meaning they have on QueueOptions.
type ExchangeOptions struct {
	// Transient declares the exchange non-durable: it does not survive a
	// broker restart.
	Transient bool
	// AutoDelete makes the broker delete the exchange when its last
	// binding goes.
	AutoDelete bool
	// Args are declaration arguments (copied).
	Args transport.Table
}

// QueueOptions adjusts a queue declaration. The zero value declares a
// durable quorum queue.
type QueueOptions struct {
	// Type is Quorum (the default), Classic or Stream. Exclusive and
	// auto-delete queues without a Type are classic; with Quorum or Stream
	// Validate refuses them.
	Type QueueType
	// Exclusive makes the queue private to the declaring connection and
	// deleted with it.
	Exclusive bool
	// AutoDelete makes the broker delete the queue when its last consumer
	// goes.
	AutoDelete bool
	// Transient declares the queue non-durable. RabbitMQ 4 refuses
	// transient queues that are not exclusive, so Validate accepts it only
	// together with Exclusive.
	Transient bool
	// Args are declaration arguments (copied); the fields below override
	// the arguments they write.
	Args transport.Table
	// DeliveryLimit sets x-delivery-limit on a quorum queue: after n
	// redeliveries the broker drops or dead-letters the message. -1 asks
	// RabbitMQ 4 for no limit (it otherwise applies 20); RabbitMQ 3, which
	// has no default limit, reads -1 as a limit the first return exceeds,
	// so leave it 0 there (docs/support.md). 0 writes no x-delivery-limit. Validate refuses it on a classic or stream queue,
	// and refuses values below -1, whose meaning differs between RabbitMQ
	// versions.
	DeliveryLimit int
	// MaxAge sets a stream's retention by age (x-max-age): the broker
	// removes whole segments whose newest message is older than it,
	// checked when a segment fills; the segment being written always
	// stays. It is written in the contract's largest-whole-unit form (7D,
	// 36h, 90m, 90s). Validate refuses an age that is not a positive whole
	// number of seconds, and the field on a queue that is not a stream.
	MaxAge time.Duration
	// MaxBytes sets a stream's retention by size (x-max-length-bytes):
	// whole segments go, oldest first, while the stream is larger. 0
	// writes nothing; Validate refuses a negative size.
	MaxBytes int64
	// SegmentBytes sets the size of a stream's segment files
	// (x-stream-max-segment-size-bytes), the unit retention removes. 0
	// writes nothing and the broker's default applies (500 MB on RabbitMQ
	// and memory://). Validate refuses a negative size, and the field on
	// a queue that is not a stream.
	SegmentBytes int64
}

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

// The DeclaredBy vocabulary of the contract fixtures.
const (
	declaredByTopology = "topology"
	declaredByConsumer = "consumer"
	declaredByBoth     = "both"
)

// NewTopology returns an empty topology.
func NewTopology() *Topology { return &Topology{} }

// mergeTable returns a copy of dst with src's entries laid over it.
func mergeTable(dst, src transport.Table) transport.Table {
	out := make(transport.Table, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		out[k] = v
	}
	return out
}

func (t *Topology) add(d Declaration) {
	d.DeclaredBy = declaredByTopology
	t.decls = append(t.decls, d)
}

// Exchange declares an exchange (durable unless o says Transient).
func (t *Topology) Exchange(name string, kind ExchangeKind, o ExchangeOptions) *Topology {
	spec := transport.ExchangeSpec{Name: name, Kind: kind, Durable: !o.Transient, AutoDelete: o.AutoDelete}
	if len(o.Args) > 0 {
		spec.Args = mergeTable(nil, o.Args)
	}
	t.add(Declaration{Kind: DeclExchange, Exchange: spec})
	return t
}

// Queue declares a queue: durable quorum unless o says otherwise.
// Exclusive and auto-delete queues without a Type are classic.
// Conflicting settings are recorded and reported by Validate.
func (t *Topology) Queue(name string, o QueueOptions) *Topology {
	r := queueRequest{typ: o.Type, typeSet: o.Type != "", exclusive: o.Exclusive, autoDelete: o.AutoDelete, transient: o.Transient, args: o.Args, deliveryLimit: o.DeliveryLimit, limitSet: o.DeliveryLimit != 0}
	if o.MaxAge != 0 || o.MaxBytes != 0 || o.SegmentBytes != 0 {
		r.args = mergeTable(nil, o.Args)
		if o.MaxAge != 0 {
			v := any(o.MaxAge) // left as a Duration when invalid, so Validate can name it
			if s, ok := formatMaxAge(o.MaxAge); ok {
				v = s
			}
			r.args["x-max-age"] = v
		}
		if o.MaxBytes != 0 {
			r.args["x-max-length-bytes"] = o.MaxBytes
		}
		if o.SegmentBytes != 0 {
			r.args["x-stream-max-segment-size-bytes"] = o.SegmentBytes
		}
	}
	if !r.typeSet {
		r.typ = Quorum
		if r.exclusive || r.autoDelete {
			r.typ = Classic
		}
	}
	for _, flag := range []struct {
		on   bool
		word string
	}{{r.exclusive, "exclusive"}, {r.autoDelete, "auto-delete"}, {r.transient, "transient"}} {
		if flag.on && r.typ != Classic {
			t.problems = append(t.problems, fmt.Sprintf("queue %q cannot be a %s queue while it is %s: RabbitMQ only replicates a queue that outlives the connection that declared it. Leave it classic, or drop the flag.", name, r.typ, flag.word))
		}
	}
	if r.transient && !r.exclusive {
		t.problems = append(t.problems, fmt.Sprintf("queue %q is transient but not exclusive: RabbitMQ 4 refuses such a queue and closes the connection (541). Make it exclusive, or drop Transient.", name))
	}
	switch r.typ {
	case Quorum, Classic, Stream:
	default:
		t.problems = append(t.problems, fmt.Sprintf("queue %q has unknown type %q; use Quorum, Classic or Stream", name, r.typ))
	}
	if v, ok := r.args["x-queue-type"]; ok && v != string(r.typ) {
		t.problems = append(t.problems, fmt.Sprintf("queue %q sets argument x-queue-type=%v but is declared as a %s queue; choose the type with QueueOptions.Type instead", name, v, r.typ))
	}
	args := mergeTable(nil, r.args)
	if r.typ == Classic {
		delete(args, "x-queue-type") // classic queues are written without it (contract §3.4)
	}
	if r.typ == Quorum || r.typ == Stream {
		args["x-queue-type"] = string(r.typ)
	}
	if r.limitSet {
		switch {
		case r.typ != Quorum:
			t.problems = append(t.problems, fmt.Sprintf("queue %q sets a delivery limit, but it is a %s queue: only quorum queues count deliveries", name, r.typ))
		case r.deliveryLimit == 0 || r.deliveryLimit < -1:
			t.problems = append(t.problems, fmt.Sprintf("queue %q sets delivery limit %d; use a positive limit, or -1 for none", name, r.deliveryLimit))
		default:
			args["x-delivery-limit"] = int64(r.deliveryLimit)
		}
	}
	if len(args) == 0 {
		args = nil
	}
	spec := transport.QueueSpec{Name: name, Durable: !r.transient, Exclusive: r.exclusive, AutoDelete: r.autoDelete, Args: args}
	t.add(Declaration{Kind: DeclQueue, Queue: spec, QueueType: r.typ})
	return t
}

// Bind binds queue to exchange with a routing key.
func (t *Topology) Bind(queue, exchange, routingKey string) *Topology {
	t.add(Declaration{Kind: DeclBinding, Binding: transport.BindingSpec{Queue: queue, Exchange: exchange, RoutingKey: routingKey}})
	return t
}

// DeadLetters wires broker dead-lettering for q into acemq.dlx and adds the
// dead-letter half ({q}.dlq, {q}.parked and their bindings). q itself must
// be declared in this topology (before or after the call) without a
// dead-letter exchange of its own; Validate reports otherwise.
func (t *Topology) DeadLetters(q string) *Topology {
	t.deadLetters = append(t.deadLetters, q)
	for _, d := range deadLetterHalf(q) {
		t.add(d)
	}
	return t
}

// Retries adds the retry ladder for q under policy: acemq.retry, one rung
// per distinct broker-held delay and the home binding. An invalid policy
// (including one whose rungs collide by name) is reported by Validate.
//
// A policy that holds its waits in the queue (HoldWaits(WaitsInQueue))
// adds no ladder: q itself is declared with the policy's delayed retry
// arguments (delayedRetryArguments), so q must be a quorum queue declared
// in this topology, and its delivery limit (RabbitMQ 4's default is 20)
// must allow the policy's attempts; Validate reports otherwise. With
// WaitsInQueueWhereSupported, Declarations lists the ladder (what every
// broker takes) and Conn.Apply and Conn.Plan choose the queue's arguments
// instead where the broker offers delayed retry (Plan.Retries says which).
func (t *Topology) Retries(q string, policy RetryPolicy) *Topology {
	t.policies = append(t.policies, queuePolicy{queue: q, policy: policy})
	if len(policy.BrokerDelays()) > 0 || policy.holdsInQueue() {
		t.retries = append(t.retries, q)
	}
	if err := policy.Err(); err != nil {
		if c := policy.rungCollision(q); c != nil {
			err = c
		}
		t.problems = append(t.problems, fmt.Sprintf("the retry policy for queue %q cannot be used: %s", q, strings.TrimPrefix(err.Error(), "acemq: ")))
	}
	for _, d := range retryLadder(q, policy) {
		t.add(d)
	}
	return t
}

// deadLetterHalf is acemq.dlx, {q}.dlq, {q}.parked and their bindings.
func deadLetterHalf(q string) []Declaration {
	out := []Declaration{{Kind: DeclExchange, Exchange: transport.ExchangeSpec{Name: DeadLetterExchange, Kind: Direct, Durable: true}}}
	for _, name := range []string{DeadLetterQueue(q), ParkedQueue(q)} {
		out = append(out,
			Declaration{Kind: DeclQueue, Queue: transport.QueueSpec{Name: name, Durable: true}, QueueType: Classic},
			Declaration{Kind: DeclBinding, Binding: transport.BindingSpec{Queue: name, Exchange: DeadLetterExchange, RoutingKey: name}})
	}
	return out
}

// retryLadder is acemq.retry, one rung per broker delay and the home
// binding, or nothing when the policy never waits in the broker.
func retryLadder(q string, policy RetryPolicy) []Declaration {
	delays := policy.BrokerDelays()
	if len(delays) == 0 {
		return nil
	}
	out := []Declaration{{Kind: DeclExchange, Exchange: transport.ExchangeSpec{Name: RetryExchange, Kind: Direct, Durable: true}}}
	for _, d := range delays {
		out = append(out, Declaration{Kind: DeclQueue, QueueType: Classic,
			Queue: transport.QueueSpec{Name: RetryQueue(q, d), Durable: true, Args: rungArguments(q, d)}})
	}
	return append(out, Declaration{Kind: DeclBinding, Binding: transport.BindingSpec{Queue: q, Exchange: RetryExchange, RoutingKey: q}})
}

// consumerDeclarations is what a consumer of q declares at start: the
// dead-letter half always, and the ladder when policy waits in the broker.
// It never includes q itself (contract §3.6).
func consumerDeclarations(q string, policy RetryPolicy) []Declaration {
	all := append(deadLetterHalf(q), retryLadder(q, policy)...)
	for i := range all {
		all[i].DeclaredBy = declaredByConsumer
	}
	return orderAndDedupe(all)
}

// mergeDeclaredBy unions two declaration lists, ordered exchanges, queues,
// bindings; an entity declared identically by both gets DeclaredBy "both".
func mergeDeclaredBy(a, b []Declaration) []Declaration {
	return orderAndDedupe(append(append([]Declaration(nil), a...), b...))
}

// sameEntity reports whether two declarations name the same entity.
func sameEntity(a, b Declaration) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case DeclExchange:
		return a.Exchange.Name == b.Exchange.Name
	case DeclQueue:
		return a.Queue.Name == b.Queue.Name
	default:
		return a.Binding.Queue == b.Binding.Queue && a.Binding.Exchange == b.Binding.Exchange && a.Binding.RoutingKey == b.Binding.RoutingKey
	}
}

// identical reports whether two declarations of one entity are equal.
func identical(a, b Declaration) bool {
	a.DeclaredBy, b.DeclaredBy = "", ""
	return reflect.DeepEqual(normalise(a), normalise(b))
}

// normalise treats an empty argument table like a missing one.
func normalise(d Declaration) Declaration {
	if len(d.Exchange.Args) == 0 {
		d.Exchange.Args = nil
	}
	if len(d.Queue.Args) == 0 {
		d.Queue.Args = nil
	}
	if len(d.Binding.Args) == 0 {
		d.Binding.Args = nil
	}
	return d
}

// orderAndDedupe orders exchanges, queues, bindings (stable) and drops
// repeats of an identical declaration, merging their DeclaredBy. Differing
// declarations of one name are kept, for Validate to report.
func orderAndDedupe(in []Declaration) []Declaration {
	var out []Declaration
	for _, kind := range []DeclKind{DeclExchange, DeclQueue, DeclBinding} {
	next:
		for _, d := range in {
			if d.Kind != kind {
				continue
			}
			for i := range out {
				if sameEntity(out[i], d) && identical(out[i], d) {
					if out[i].DeclaredBy != d.DeclaredBy {
						out[i].DeclaredBy = declaredByBoth
					}
					continue next
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// Declarations returns the entities in declaration order: exchanges, then
// queues, then bindings, each in the order the builder added them, with
// an entity declared identically twice listed once. Queues passed to
// DeadLetters carry their dead-letter arguments. The result is a copy.
func (t *Topology) Declarations() []Declaration {
	return t.declarationsFor(nil)
}

// declarationsFor is Declarations with the queues in inQueue (those whose
// WaitsInQueueWhereSupported policy Conn.Apply resolved to the queue)
// declared with their delayed retry arguments and without their ladder.
func (t *Topology) declarationsFor(inQueue map[string]bool) []Declaration {
	decls := make([]Declaration, len(t.decls))
	copy(decls, t.decls)
	for i := range decls {
		d := &decls[i]
		if d.Kind != DeclQueue || !t.deadLettered(d.Queue.Name) {
			continue
		}
		if x, custom := d.Queue.Args["x-dead-letter-exchange"]; custom && x != DeadLetterExchange {
			continue // left as declared, for Validate to refuse
		}
		d.Queue.Args = mergeTable(transport.Table{
			"x-dead-letter-exchange":    DeadLetterExchange,
			"x-dead-letter-routing-key": DeadLetterQueue(d.Queue.Name),
		}, d.Queue.Args)
	}
	return orderAndDedupe(t.withRetryWaits(decls, inQueue))
}

func (t *Topology) deadLettered(q string) bool {
	for _, n := range t.deadLetters {
		if n == q {
			return true
		}
	}
	return false
}

// Validate reports every problem at once in a *TopologyError, or nil. It
// never dials.
func (t *Topology) Validate() error {
	problems := append([]string(nil), t.problems...)
	decls := t.Declarations()
	for _, q := range t.deadLetters {
		var found *Declaration
		for i := range decls {
			if decls[i].Kind == DeclQueue && decls[i].Queue.Name == q {
				found = &decls[i]
				break
			}
		}
		if found == nil {
			problems = append(problems, fmt.Sprintf("DeadLetters names queue %q, which this topology does not declare", q))
			continue
		}
		for _, user := range t.decls {
			if user.Kind != DeclQueue || user.Queue.Name != q {
				continue
			}
			if x, ok := user.Queue.Args["x-dead-letter-exchange"]; ok && x != DeadLetterExchange {
				problems = append(problems, fmt.Sprintf("DeadLetters cannot wire queue %q into %s: the queue already dead-letters to exchange %v. Drop that argument, or drop DeadLetters.", q, DeadLetterExchange, x))
			}
		}
	}
	for _, d := range decls {
		if d.Kind != DeclQueue || d.QueueType != Stream {
			continue
		}
		if t.deadLettered(d.Queue.Name) {
			problems = append(problems, fmt.Sprintf("DeadLetters cannot wire stream %q: streams do not dead-letter. Leave dead-lettering off, or use a quorum queue.", d.Queue.Name))
		}
		for _, r := range t.retries {
			if r == d.Queue.Name {
				problems = append(problems, fmt.Sprintf("Retries cannot add a retry ladder to stream %q: streams have no retry ladder (contract §3.11). Drop Retries, or use a quorum queue.", r))
			}
		}
	}
	problems = append(problems, entityProblems(decls)...)
	for _, d := range decls {
		problems = append(problems, versionArgProblems(d)...)
	}
	problems = append(problems, t.retryWaitProblems(decls)...)
	problems = append(problems, streamProblems(decls)...)
	problems = append(problems, referenceProblems(decls)...)
	if len(problems) == 0 {
		return nil
	}
	return &TopologyError{Problems: dedupeStrings(problems)}
}

func dedupeStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// entityProblems checks each declaration on its own and names declared
// twice differently.
func entityProblems(decls []Declaration) []string {
	var problems []string
	for i, d := range decls {
		switch d.Kind {
		case DeclExchange:
			name := d.Exchange.Name
			switch {
			case strings.TrimSpace(name) == "":
				problems = append(problems, "an exchange has a blank name; the default exchange cannot be declared")
			case strings.HasPrefix(name, "amq."):
				problems = append(problems, fmt.Sprintf("exchange %q starts with \"amq.\", which RabbitMQ reserves for its own exchanges", name))
			}
			switch d.Exchange.Kind {
			case Direct, Topic, Fanout, Headers:
			default:
				problems = append(problems, fmt.Sprintf("exchange %q has unknown kind %q; use Direct, Topic, Fanout or Headers", name, d.Exchange.Kind))
			}
		case DeclQueue:
			name := d.Queue.Name
			switch {
			case strings.TrimSpace(name) == "":
				problems = append(problems, "a queue has a blank name; give every queue in a topology a name")
			case strings.HasPrefix(name, "amq."):
				problems = append(problems, fmt.Sprintf("queue %q starts with \"amq.\", which RabbitMQ reserves for its own queues", name))
			}
			if _, ok := d.Queue.Args["x-delivery-limit"]; ok && d.QueueType != Quorum {
				problems = append(problems, fmt.Sprintf("queue %q sets a delivery limit, but it is a %s queue: only quorum queues count deliveries", name, d.QueueType))
			}
		case DeclBinding:
			b := d.Binding
			if strings.TrimSpace(b.Queue) == "" {
				problems = append(problems, fmt.Sprintf("%s has a blank queue name", describeBinding(b)))
			}
			if b.Exchange == "" {
				problems = append(problems, fmt.Sprintf("%s names the default exchange, which cannot be bound; every queue is already reachable through it by its name", describeBinding(b)))
			}
		}
		for _, e := range decls[:i] {
			if e.Kind != DeclBinding && sameEntity(e, d) && !identical(e, d) {
				problems = append(problems, fmt.Sprintf("%s is declared twice differently: %s and %s", kindWord(d), describeDecl(e), describeDecl(d)))
				break
			}
		}
	}
	return problems
}

// referenceProblems reports bindings to entities the list does not declare.
func referenceProblems(decls []Declaration) []string {
	exchanges, queues := map[string]bool{}, map[string]bool{}
	for _, d := range decls {
		switch d.Kind {
		case DeclExchange:
			exchanges[d.Exchange.Name] = true
		case DeclQueue:
			queues[d.Queue.Name] = true
		}
	}
	var problems []string
	for _, d := range decls {
		if d.Kind != DeclBinding {
			continue
		}
		b := d.Binding
		if b.Queue != "" && !queues[b.Queue] {
			problems = append(problems, fmt.Sprintf("%s names queue %q, which this topology does not declare", describeBinding(b), b.Queue))
		}
		if b.Exchange != "" && !exchanges[b.Exchange] {
			problems = append(problems, fmt.Sprintf("%s names exchange %q, which this topology does not declare", describeBinding(b), b.Exchange))
		}
	}
	return problems
}

func kindWord(d Declaration) string {
	switch d.Kind {
	case DeclExchange:
		return fmt.Sprintf("exchange %q", d.Exchange.Name)
	case DeclQueue:
		return fmt.Sprintf("queue %q", d.Queue.Name)
	}
	return describeBinding(d.Binding)
}

func describeBinding(b transport.BindingSpec) string {
	return fmt.Sprintf("binding of queue %q to exchange %q with key %q", b.Queue, b.Exchange, b.RoutingKey)
}

// describeTable renders arguments sorted by key: "k=v, k=v".
func describeTable(t transport.Table) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, t[k])
	}
	return strings.Join(parts, ", ")
}

// describeDecl renders one declaration on one line.
func describeDecl(d Declaration) string {
	var attrs []string
	switch d.Kind {
	case DeclExchange:
		e := d.Exchange
		attrs = append(attrs, string(e.Kind))
		attrs = append(attrs, durability(e.Durable))
		if e.AutoDelete {
			attrs = append(attrs, "auto-delete")
		}
		if len(e.Args) > 0 {
			attrs = append(attrs, describeTable(e.Args))
		}
		return fmt.Sprintf("exchange %s (%s)", e.Name, strings.Join(attrs, ", "))
	case DeclQueue:
		q := d.Queue
		attrs = append(attrs, string(d.QueueType), durability(q.Durable))
		if q.Exclusive {
			attrs = append(attrs, "exclusive")
		}
		if q.AutoDelete {
			attrs = append(attrs, "auto-delete")
		}
		if len(q.Args) > 0 {
			attrs = append(attrs, describeTable(q.Args))
		}
		return fmt.Sprintf("queue %s (%s)", q.Name, strings.Join(attrs, ", "))
	case DeclBinding:
		b := d.Binding
		s := fmt.Sprintf("binding %s <- %s (key %q)", b.Queue, b.Exchange, b.RoutingKey)
		if len(b.Args) > 0 {
			s += " (" + describeTable(b.Args) + ")"
		}
		return s
	}
	return fmt.Sprintf("declaration of kind %d", int(d.Kind))
}

func durability(durable bool) string {
	if durable {
		return "durable"
	}
	return "transient"
}

// String renders the declaration on one line, as Describe lists it:
// "exchange orders (topic, durable)", "queue orders.new.dlq (classic,
// durable)", `binding orders.new <- orders (key "order.*")`.
func (d Declaration) String() string { return describeDecl(d) }

// Describe renders "Topology: N exchanges, N queues, N bindings" and one
// line per declaration, in Declarations order. It never dials.
func (t *Topology) Describe() string {
	decls := t.Declarations()
	var n [4]int
	for _, d := range decls {
		if d.Kind >= DeclExchange && d.Kind <= DeclBinding {
			n[d.Kind]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Topology: %d exchanges, %d queues, %d bindings\n", n[DeclExchange], n[DeclQueue], n[DeclBinding])
	for _, d := range decls {
		b.WriteString("  " + describeDecl(d) + "\n")
	}
	return b.String()
}

// TopologyError lists every validation problem of a topology.
type TopologyError struct {
	Problems []string
}

// Error starts "acemq: " and lists every problem, one per line.
func (e *TopologyError) Error() string {
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "acemq: the topology has %d %s:", len(e.Problems), noun)
	for _, p := range e.Problems {
		b.WriteString("\n  - " + p)
	}
	return b.String()
}
