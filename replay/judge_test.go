package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acemq-go/acemq/transport"
)

// The rules of what a read does, per broker version and queue, from the
// facts the management API gives (RabbitMQ's own resolution of arguments,
// policies and operator policies, 3.10 to 4.3).
func TestJudgeDecidesEachBrokerVersionAndQueue(t *testing.T) {
	v310 := brokerOf(transport.Server{Product: "RabbitMQ", Version: "3.10.8"})
	v40 := brokerOf(transport.Server{Product: "RabbitMQ", Version: "4.0.5"})
	v43 := brokerOf(transport.Server{Product: "RabbitMQ", Version: "4.3.6"})
	quorum := func(args string, pols ...policy) *queueFacts {
		f := &queueFacts{name: "shop.orders.dlq", Type: "quorum", policies: pols}
		if args != "" {
			dec := json.NewDecoder(strings.NewReader(args))
			dec.UseNumber()
			if err := dec.Decode(&f.Arguments); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	pol := func(name, pattern string, prio int, def map[string]any) policy {
		return policy{Name: name, Pattern: pattern, ApplyTo: "queues", Priority: prio, Definition: def}
	}
	for _, c := range []struct {
		name   string
		b      broker
		q      *queueFacts
		safe   bool
		byNack bool
		limit  int
		why    string
	}{
		{"classic on 4.0", v40, &queueFacts{Type: "classic"}, true, false, 0, "classic queue counts no deliveries"},
		{"quorum with nothing set on 3.10: no limit", v310, quorum(""), true, false, 0, "no delivery limit"},
		{"quorum with nothing set on 4.0: the default 20", v40, quorum(""), false, false, 20, "RabbitMQ 4's default"},
		{"quorum -1 on 4.0: none", v40, quorum(`{"x-delivery-limit": -1}`), true, false, 0, "no delivery limit"},
		{"quorum -1 on 3.10: every return exceeds it", v310, quorum(`{"x-delivery-limit": -1}`), false, false, -1, "every return exceeds"},
		{"quorum 5 on 3.10", v310, quorum(`{"x-delivery-limit": 5}`), false, false, 5, "limit of 5"},
		{"quorum with a policy of -1 on 4.0", v40, quorum("", pol("no-limit", `\.dlq$`, 0, map[string]any{"delivery-limit": json.Number("-1")})), true, false, 0, "no delivery limit"},
		{"quorum -1 with a policy of 7 on 4.0: the policy", v40, quorum(`{"x-delivery-limit": -1}`, pol("seven", `^shop\.`, 0, map[string]any{"delivery-limit": json.Number("7")})), false, false, 7, `policy "seven"`},
		{"a higher-priority policy wins", v40, quorum("", pol("seven", `^shop\.`, 0, map[string]any{"delivery-limit": json.Number("7")}), pol("none", `dlq`, 5, map[string]any{"delivery-limit": json.Number("-1")})), true, false, 0, ""},
		{"a tie at the top takes the worse", v40, quorum("", pol("seven", `^shop\.`, 5, map[string]any{"delivery-limit": json.Number("7")}), pol("none", `dlq`, 5, map[string]any{"delivery-limit": json.Number("-1")})), false, false, 7, `policy "seven"`},
		{"a policy that does not match is no policy", v310, quorum("", pol("other", `^billing\.`, 0, map[string]any{"delivery-limit": json.Number("3")})), true, false, 0, ""},
		{"a policy a quorum queue refuses does not apply", v310, quorum("", pol("ha", `.`, 0, map[string]any{"delivery-limit": json.Number("3"), "ha-mode": "all"})), true, false, 0, ""},
		{"a pattern Go cannot read may match", v310, quorum("", pol("lookahead", `^(?=shop)`, 0, map[string]any{"delivery-limit": json.Number("3")})), false, false, 3, `policy "lookahead"`},
		{"an operator policy lowers a policy's limit", v310, quorum("", pol("ten", `.`, 0, map[string]any{"delivery-limit": json.Number("10")})), false, false, 10, ""},
		{"quorum with nothing set on 4.3: the nack is not counted", v43, quorum(""), true, true, 20, "does not count"},
		{"quorum -1 on 4.3: closed channel keeps the place", v43, quorum(`{"x-delivery-limit": -1}`), true, false, 0, "no delivery limit"},
		{"4.3 delaying nacked returns", v43, quorum(`{"x-delayed-retry-type": "returned"}`), false, true, 20, "holds back"},
		{"4.3 delaying failed returns only: a nack is fine", v43, quorum(`{"x-delayed-retry-type": "failed"}`), true, true, 20, ""},
		{"4.3 without a limit delaying failed returns", v43, quorum(`{"x-delivery-limit": -1, "x-delayed-retry-type": "failed"}`), false, false, 0, "closed channel"},
		{"a stream", v40, &queueFacts{Type: "stream"}, false, false, 0, "stream package"},
		{"unknown queue on 4.0", v40, nil, false, false, 0, "could not be learned"},
		{"unknown queue on 4.3", v43, nil, false, false, 0, "could not be learned"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "an operator policy lowers a policy's limit" {
				c.q.operator = []policy{pol("ops", `.`, 0, map[string]any{"delivery-limit": json.Number("12")})}
			}
			a := judge("shop.orders.dlq", c.b, c.q, nil)
			if a.Safe != c.safe || a.ReturnByNack != c.byNack || a.DeliveryLimit != c.limit || !strings.Contains(a.Why, c.why) {
				t.Fatalf("safe %v by nack %v limit %d (%s); want safe %v by nack %v limit %d, a reason saying %q", a.Safe, a.ReturnByNack, a.DeliveryLimit, a.Why, c.safe, c.byNack, c.limit, c.why)
			}
		})
	}
}

// The in-process broker counts as RabbitMQ 4.3 does, and a read there
// hands messages back by basic.nack, which it does not count: safe with
// no management API at all.
func TestJudgeTrustsTheInProcessBroker(t *testing.T) {
	a := judge("q.dlq", brokerOf(transport.Server{Product: "AceMQ memory"}), nil, nil)
	if !a.Safe || !a.ReturnByNack {
		t.Fatalf("%+v", a)
	}
}
