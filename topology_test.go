package acemq

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq/transport"
)

func findQueue(t *testing.T, top *Topology, name string) Declaration {
	t.Helper()
	for _, d := range top.Declarations() {
		if d.Kind == DeclQueue && d.Queue.Name == name {
			return d
		}
	}
	t.Fatalf("queue %s not declared", name)
	return Declaration{}
}

func TestTopologyQueueDefaultsAndOptions(t *testing.T) {
	top := NewTopology().
		Queue("q", QueueOptions{}).
		Queue("c", QueueOptions{Type: Classic}).
		Queue("s", QueueOptions{Type: Stream}).
		Queue("x", QueueOptions{Exclusive: true, Transient: true}).
		Queue("a", QueueOptions{AutoDelete: true}).
		Queue("l", QueueOptions{DeliveryLimit: 5, Args: transport.Table{"x-max-length": 10}})
	if err := top.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cases := []struct {
		name    string
		typ     QueueType
		durable bool
		args    transport.Table
	}{
		{"q", Quorum, true, transport.Table{"x-queue-type": "quorum"}},
		{"c", Classic, true, nil},
		{"s", Stream, true, transport.Table{"x-queue-type": "stream"}},
		{"x", Classic, false, nil},
		{"a", Classic, true, nil},
		{"l", Quorum, true, transport.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5), "x-max-length": 10}},
	}
	for _, c := range cases {
		d := findQueue(t, top, c.name)
		if d.QueueType != c.typ || d.Queue.Durable != c.durable || !reflect.DeepEqual(d.Queue.Args, c.args) {
			t.Errorf("queue %s = %s %+v, want %s durable=%v args %v", c.name, d.QueueType, d.Queue, c.typ, c.durable, c.args)
		}
	}
}

func TestTopologyExchangeOptions(t *testing.T) {
	top := NewTopology().
		Exchange("e", Fanout, ExchangeOptions{AutoDelete: true, Transient: true, Args: transport.Table{"alternate-exchange": "ae"}}).
		Exchange("d", Direct, ExchangeOptions{})
	got := top.Declarations()
	want := transport.ExchangeSpec{Name: "e", Kind: Fanout, AutoDelete: true, Args: transport.Table{"alternate-exchange": "ae"}}
	if !reflect.DeepEqual(got[0].Exchange, want) {
		t.Errorf("exchange e = %+v, want %+v", got[0].Exchange, want)
	}
	if !got[1].Exchange.Durable || got[1].DeclaredBy != "topology" {
		t.Errorf("exchange d = %+v", got[1])
	}
}

func TestTopologyDeclarationsOrderedAndDeduplicated(t *testing.T) {
	top := NewTopology().
		Bind("a", "e", "k").
		Queue("a", QueueOptions{}).
		Exchange("e", Direct, ExchangeOptions{}).
		DeadLetters("a").
		Queue("b", QueueOptions{}).
		DeadLetters("b").
		Exchange("e", Direct, ExchangeOptions{}).
		Bind("a", "e", "k")
	decls := top.Declarations()
	var got []string
	for _, d := range decls {
		got = append(got, d.String())
	}
	want := []string{
		"exchange e (direct, durable)",
		"exchange acemq.dlx (direct, durable)",
		"queue a (quorum, durable, x-dead-letter-exchange=acemq.dlx, x-dead-letter-routing-key=a.dlq, x-queue-type=quorum)",
		"queue a.dlq (classic, durable)",
		"queue a.parked (classic, durable)",
		"queue b (quorum, durable, x-dead-letter-exchange=acemq.dlx, x-dead-letter-routing-key=b.dlq, x-queue-type=quorum)",
		"queue b.dlq (classic, durable)",
		"queue b.parked (classic, durable)",
		`binding a <- e (key "k")`,
		`binding a.dlq <- acemq.dlx (key "a.dlq")`,
		`binding a.parked <- acemq.dlx (key "a.parked")`,
		`binding b.dlq <- acemq.dlx (key "b.dlq")`,
		`binding b.parked <- acemq.dlx (key "b.parked")`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Declarations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := top.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestTopologyRetriesAddsLadder(t *testing.T) {
	top := NewTopology().Queue("q", QueueOptions{}).Retries("q", Exponential(6, 10*time.Second, 5*time.Minute))
	if err := top.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	var names []string
	for _, d := range top.Declarations() {
		names = append(names, d.String())
	}
	// Rung names come from renderDelay: 40s, 80s, 160s.
	for _, rung := range []string{"q.retry.40s", "q.retry.80s", "q.retry.160s"} {
		d := findQueue(t, top, rung)
		if d.QueueType != Classic || len(d.Queue.Args) != 3 {
			t.Errorf("rung %s = %s %v", rung, d.QueueType, d.Queue.Args)
		}
	}
	if last := names[len(names)-1]; last != `binding q <- acemq.retry (key "q")` {
		t.Errorf("last declaration %s, want the home binding", last)
	}
	// A policy that never waits in the broker adds nothing.
	if n := len(NewTopology().Retries("q", Fixed(3, time.Second)).Declarations()); n != 0 {
		t.Errorf("consumer-only policy added %d declarations", n)
	}
}

func TestConsumerDeclarationsNeverDeclareTheSourceQueue(t *testing.T) {
	decls := consumerDeclarations("q", NoRetry())
	var got []string
	for _, d := range decls {
		if d.DeclaredBy != "consumer" {
			t.Errorf("%s declared by %q", d, d.DeclaredBy)
		}
		got = append(got, d.String())
	}
	want := []string{
		"exchange acemq.dlx (direct, durable)",
		"queue q.dlq (classic, durable)",
		"queue q.parked (classic, durable)",
		`binding q.dlq <- acemq.dlx (key "q.dlq")`,
		`binding q.parked <- acemq.dlx (key "q.parked")`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("consumerDeclarations(NoRetry):\n%s", strings.Join(got, "\n"))
	}
	ladder := consumerDeclarations("q", Fixed(3, time.Minute))
	if len(ladder) != len(want)+3 { // acemq.retry, q.retry.1m, home binding
		t.Errorf("with a broker delay: %v", ladder)
	}
	for _, d := range ladder {
		if d.Kind == DeclQueue && d.Queue.Name == "q" {
			t.Error("the source queue is declared")
		}
	}
}

func TestTopologyValidateReportsEveryProblemAtOnce(t *testing.T) {
	top := NewTopology().
		Exchange("", Direct, ExchangeOptions{}).
		Exchange("amq.mine", Direct, ExchangeOptions{}).
		Exchange("weird", ExchangeKind("x-delayed"), ExchangeOptions{}).
		Exchange("twice", Direct, ExchangeOptions{}).
		Exchange("twice", Topic, ExchangeOptions{}).
		Queue("", QueueOptions{}).
		Queue("amq.q", QueueOptions{Type: Classic}).
		Queue("replies", QueueOptions{Type: Quorum, Exclusive: true}).
		Queue("events", QueueOptions{Type: Stream, AutoDelete: true}).
		Queue("temp", QueueOptions{Transient: true}).
		Queue("limited", QueueOptions{Type: Classic, DeliveryLimit: 3}).
		Queue("typed", QueueOptions{Args: transport.Table{"x-queue-type": "classic"}}).
		Queue("stream", QueueOptions{Type: Stream}).
		DeadLetters("stream").
		Retries("stream", Fixed(2, time.Minute)).
		Queue("custom", QueueOptions{Args: transport.Table{"x-dead-letter-exchange": "mine"}}).
		DeadLetters("custom").
		DeadLetters("ghost").
		Retries("collide", Exponential(3, time.Second, 1500*time.Millisecond).WaitInBrokerFrom(time.Second)).
		Bind("missing", "twice", "k").
		Bind("custom", "nowhere", "k").
		Bind("custom", "", "k")
	err := top.Validate()
	var te *TopologyError
	if !errors.As(err, &te) {
		t.Fatalf("Validate() = %v, want a *TopologyError", err)
	}
	want := []string{
		`queue "replies" cannot be a quorum queue while it is exclusive: RabbitMQ only replicates a queue that outlives the connection that declared it. Leave it classic, or drop the flag.`,
		`queue "events" cannot be a stream queue while it is auto-delete: RabbitMQ only replicates a queue that outlives the connection that declared it. Leave it classic, or drop the flag.`,
		`queue "temp" cannot be a quorum queue while it is transient`,
		`queue "temp" is transient but not exclusive`,
		`queue "limited" sets a delivery limit, but it is a classic queue`,
		`the retry policy for queue "collide" cannot be used: retry delays 1s and 1.5s would both wait on queue collide.retry.1s with different TTLs; use delays that are whole seconds`,
		`queue "typed" sets argument x-queue-type=classic but is declared as a quorum queue`,
		`DeadLetters cannot wire stream "stream"`,
		`Retries cannot add a retry ladder to stream "stream"`,
		`DeadLetters names queue "ghost", which this topology does not declare`,
		`DeadLetters cannot wire queue "custom" into acemq.dlx: the queue already dead-letters to exchange mine`,
		`an exchange has a blank name`,
		`exchange "amq.mine" starts with "amq."`,
		`exchange "weird" has unknown kind "x-delayed"`,
		`exchange "twice" is declared twice differently`,
		`a queue has a blank name`,
		`queue "amq.q" starts with "amq."`,
		`binding of queue "custom" to exchange "" with key "k" names the default exchange`,
		`binding of queue "missing" to exchange "twice" with key "k" names queue "missing", which this topology does not declare`,
		`binding of queue "custom" to exchange "nowhere" with key "k" names exchange "nowhere", which this topology does not declare`,
		`binding of queue "collide" to exchange "acemq.retry" with key "collide" names queue "collide", which this topology does not declare`,
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "acemq: ") {
		t.Errorf("Error() does not start with acemq: %q", msg)
	}
	for _, w := range want {
		found := false
		for _, p := range te.Problems {
			found = found || strings.HasPrefix(p, w)
		}
		if !found {
			t.Errorf("no problem starts with %q", w)
		}
		if !strings.Contains(msg, w) {
			t.Errorf("Error() does not list %q", w)
		}
	}
	// The quorum sentence is exact, word for word (behaviour §6.2).
	if te.Problems[0] != want[0] {
		t.Errorf("first problem %q", te.Problems[0])
	}
}

func TestTopologyValidateTransientNeedsExclusive(t *testing.T) {
	err := NewTopology().Queue("t", QueueOptions{Type: Classic, Transient: true}).Validate()
	if err == nil || !strings.Contains(err.Error(), `queue "t" is transient but not exclusive`) {
		t.Errorf("Validate() = %v", err)
	}
	if err := NewTopology().Queue("t", QueueOptions{Exclusive: true, Transient: true}).Validate(); err != nil {
		t.Errorf("exclusive transient refused: %v", err)
	}
}

func TestTopologyValidateDeliveryLimitValues(t *testing.T) {
	if d := NewTopology().Queue("q", QueueOptions{}).Declarations()[0]; d.Queue.Args["x-delivery-limit"] != nil {
		t.Errorf("the zero DeliveryLimit wrote x-delivery-limit=%v; it must write none", d.Queue.Args["x-delivery-limit"])
	}
	for _, n := range []int{-2, -20} {
		if err := NewTopology().Queue("q", QueueOptions{DeliveryLimit: n}).Validate(); err == nil {
			t.Errorf("QueueOptions{DeliveryLimit: %d} accepted", n)
		}
	}
	top := NewTopology().Queue("q", QueueOptions{DeliveryLimit: -1})
	if err := top.Validate(); err != nil {
		t.Errorf("QueueOptions{DeliveryLimit: -1}: %v", err)
	}
	if got := findQueue(t, top, "q").Queue.Args["x-delivery-limit"]; got != int64(-1) {
		t.Errorf("x-delivery-limit = %#v", got)
	}
}

func TestTopologyErrorCountsProblems(t *testing.T) {
	e := &TopologyError{Problems: []string{"one"}}
	if got := e.Error(); got != "acemq: the topology has 1 problem:\n  - one" {
		t.Errorf("Error() = %q", got)
	}
}

func TestTopologyDescribe(t *testing.T) {
	got := NewTopology().Exchange("orders", Topic, ExchangeOptions{}).Queue("orders.new", QueueOptions{}).Bind("orders.new", "orders", "order.*").Describe()
	want := "Topology: 1 exchanges, 1 queues, 1 bindings\n" +
		"  exchange orders (topic, durable)\n" +
		"  queue orders.new (quorum, durable, x-queue-type=quorum)\n" +
		"  binding orders.new <- orders (key \"order.*\")\n"
	if got != want {
		t.Errorf("Describe() =\n%s\nwant\n%s", got, want)
	}
}

func TestTopologyPlanAndApplyReportAFailedChannel(t *testing.T) {
	boom := &transport.Error{Code: transport.CodeConnectionForced, Reason: "CONNECTION_FORCED", Server: true, Connection: true}
	open := func(context.Context) (transport.Channel, error) { return nil, boom }
	decls := NewTopology().Exchange("e", Direct, ExchangeOptions{}).Declarations()
	if _, err := planDeclarations(context.Background(), open, decls); !errors.Is(err, boom) {
		t.Errorf("plan: %v", err)
	}
	_, err := applyDeclarations(context.Background(), open, decls, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "exchange e (direct, durable)") {
		t.Errorf("apply: %v", err)
	}
	// Bindings alone need no channel: they are always Unknown.
	plan, err := planDeclarations(context.Background(), open, []Declaration{{Kind: DeclBinding, Binding: transport.BindingSpec{Queue: "q", Exchange: "e", RoutingKey: "k"}}})
	if err != nil || plan.String() != "binding q <- e (key \"k\"): unknown: AMQP cannot report bindings; apply declares it (idempotent)\n" {
		t.Errorf("plan = %q, %v", plan.String(), err)
	}
	// apply refuses an invalid list before opening anything.
	if _, err := applyDeclarations(context.Background(), open, NewTopology().Exchange("amq.x", Direct, ExchangeOptions{}).Declarations(), nil); !strings.Contains(err.Error(), "amq.") {
		t.Errorf("apply of an invalid list: %v", err)
	}
}
