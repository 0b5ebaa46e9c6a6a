package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq/internal/redact"
)

// queueFacts is what RabbitMQ's management API says about a queue and the
// policies that may apply to it. It reads definitions only (the queue's
// arguments, the vhost's policies and operator policies), never the
// statistics, which lag and which RabbitMQ 4 may not collect at all.
type queueFacts struct {
	name      string
	Type      string
	Arguments map[string]any
	policies  []policy // the vhost's policies
	operator  []policy // the vhost's operator policies
}

// policy is one policy or operator policy as the management API lists it.
type policy struct {
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

// askManagement reads queue's type and arguments and the vhost's
// policies from the management API at base.
func askManagement(ctx context.Context, base, vhost, queue string) (*queueFacts, error) {
	if vhost == "" {
		vhost = "/"
	}
	var q struct {
		Type      string         `json:"type"`
		Arguments map[string]any `json:"arguments"`
	}
	v := url.PathEscape(vhost)
	if err := getJSON(ctx, base, "api/queues/"+v+"/"+url.PathEscape(queue), &q); err != nil {
		return nil, err
	}
	f := &queueFacts{name: queue, Type: q.Type, Arguments: q.Arguments}
	if f.Type == "" {
		f.Type = "classic" // RabbitMQ before 3.9 did not say
	}
	if err := getJSON(ctx, base, "api/policies/"+v, &f.policies); err != nil {
		return nil, err
	}
	if err := getJSON(ctx, base, "api/operator-policies/"+v, &f.operator); err != nil {
		return nil, err
	}
	return f, nil
}

// getJSON GETs path under the management API at base into out, within
// 10 s, trying once more after a failure to connect or a 5xx answer (a
// busy broker), since an answer that never comes refuses the read.
func getJSON(ctx context.Context, base, path string, out any) error {
	var err error
	for try := range 2 {
		var retry bool
		if retry, err = getJSONOnce(ctx, base, path, out); err == nil || !retry || ctx.Err() != nil {
			return err
		}
		if try == 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return err
}

func getJSONOnce(ctx context.Context, base, path string, out any) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return false, fmt.Errorf("the management URL %q does not parse; give one such as http://user:pass@host:15672/", redact.URL(base))
	}
	user := u.User
	u.User = nil
	// The path segments are escaped already ("/" in a vhost is %2F), so
	// the URL is built as text rather than through url.URL.Path.
	endpoint := strings.TrimSuffix(u.String(), "/") + "/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return false, err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	// No connection is kept for later: a read asks a few times, rarely,
	// and an idle connection would outlive it.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return true, fmt.Errorf("the RabbitMQ management API at %s did not answer (%v)", redact.URL(base), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode >= 500, &statusError{code: resp.StatusCode, text: fmt.Sprintf("the RabbitMQ management API at %s answered %s to %s", redact.URL(base), resp.Status, path)}
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return false, fmt.Errorf("the RabbitMQ management API's answer to %s did not parse (%v)", path, err)
	}
	return false, nil
}

// intValue reads an integer argument or policy value.
func intValue(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case float64:
		return int(n), n == float64(int(n))
	case int:
		return n, true
	case int64:
		return int(n), true
	}
	return 0, false
}

// quorumUnsupported reports whether a policy key makes a policy not apply
// to a quorum queue at all (RabbitMQ's unsupported_policies for quorum
// queues, 3.10 to 4.3).
func quorumUnsupported(key string) bool {
	switch key {
	case "max-priority", "queue-mode", "single-active-consumer",
		"ha-mode", "ha-params", "ha-sync-mode", "ha-promote-on-shutdown",
		"ha-promote-on-failure", "queue-master-locator",
		"max-age", "stream-max-segment-size-bytes", "initial-cluster-size":
		return true
	}
	return false
}

// candidates are the policies of ps that may be the one in force on the
// queue, as RabbitMQ picks it: the highest priority among those whose
// pattern matches the name, whose apply-to covers the queue, and whose
// definition holds nothing a quorum queue refuses. Ties, and patterns
// whose match cannot be told here (Erlang's regular expressions are not
// Go's; a name that is not ASCII), widen the set: every candidate is one
// that may be in force. A nil policy among them stands for "none".
func (f *queueFacts) candidates(ps []policy, name string) []*policy {
	sorted := append([]policy(nil), ps...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Priority > sorted[j].Priority })
	var out []*policy
	sure := false
	surePriority := 0
	for i := range sorted {
		p := &sorted[i]
		if sure && p.Priority < surePriority {
			break
		}
		if !appliesTo(p.ApplyTo, f.Type) || !applicable(p.Definition) {
			continue
		}
		match, certain := matches(p.Pattern, name)
		if !match && certain {
			continue
		}
		out = append(out, p)
		if match && certain && !sure {
			sure, surePriority = true, p.Priority
		}
	}
	if !sure {
		out = append(out, nil)
	}
	return out
}

func appliesTo(applyTo, queueType string) bool {
	switch applyTo {
	case "all", "queues", "":
		return true
	case "quorum_queues":
		return queueType == "quorum"
	case "classic_queues":
		return queueType == "classic"
	case "streams":
		return queueType == "stream"
	}
	return false
}

func applicable(def map[string]any) bool {
	for k := range def {
		if quorumUnsupported(k) {
			return false
		}
	}
	return true
}

// matches reports whether pattern (an Erlang regular expression, matched
// unanchored against the name's bytes) matches name, and whether that is
// certain: it is not when Go's regexp cannot compile the pattern or when
// the name or pattern is not plain ASCII (Erlang matches bytes, Go runes)
// or the name holds a newline ("$" differs).
func matches(pattern, name string) (match, certain bool) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return true, false
	}
	m := re.MatchString(name)
	if !ascii(pattern) || !ascii(name) || strings.ContainsRune(name, '\n') {
		return m, false
	}
	return m, true
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// value is one candidate value of a policy key: set (with the policy's
// name) or not.
type value struct {
	set  bool
	n    any
	from string
}

// values lists what key may be in force on the queue from the policies,
// merged with the operator policies as RabbitMQ merges them (merge; nil:
// the operator policy wins).
func (f *queueFacts) values(key string, merge func(pol, op int) int) []value {
	name := f.name
	var pols, ops []value
	for _, p := range f.candidates(f.policies, name) {
		pols = append(pols, valueOf(p, key, "policy"))
	}
	for _, p := range f.candidates(f.operator, name) {
		ops = append(ops, valueOf(p, key, "operator policy"))
	}
	var out []value
	for _, p := range pols {
		for _, o := range ops {
			switch {
			case !p.set:
				out = append(out, o)
			case !o.set:
				out = append(out, p)
			default:
				pn, ok1 := intValue(p.n)
				on, ok2 := intValue(o.n)
				if !ok1 || !ok2 || merge == nil {
					out = append(out, o)
					continue
				}
				out = append(out, value{set: true, n: merge(pn, on), from: p.from + " and " + o.from})
			}
		}
	}
	return out
}

func valueOf(p *policy, key, kind string) value {
	if p == nil {
		return value{}
	}
	v, ok := p.Definition[key]
	if !ok {
		return value{}
	}
	return value{set: true, n: v, from: fmt.Sprintf("%s %q", kind, p.Name)}
}

// deliveryLimit is the delivery limit in force on a quorum queue on
// broker b, as RabbitMQ resolves its x-delivery-limit argument and the
// delivery-limit policies: on 3.x the lower of the two and none when
// neither is set; on 4.x the same, except that a negative value on either
// side yields the higher (so -1 means none only when nothing else sets a
// limit), and 20 when neither is set. Where several policies may be in
// force the worst is taken: unlimited is true only when every one of them
// leaves the queue without a limit.
func (f *queueFacts) deliveryLimit(b broker) (limit int, from string, unlimited bool) {
	v4 := b.major >= 4 || b.major == 0
	merge := func(x, y int) int { return min(x, y) }
	if v4 {
		merge = func(x, y int) int {
			if x < 0 || y < 0 {
				return max(x, y)
			}
			return min(x, y)
		}
	}
	arg, hasArg := f.Arguments["x-delivery-limit"]
	argN, argOK := intValue(arg)
	unlimited = true
	// The worst candidate is reported: the lowest limit (on 3.x a
	// negative one, which every return exceeds, is lower still).
	worst := func(l int, src string) {
		if unlimited || l < limit {
			limit, from = l, src
		}
		unlimited = false
	}
	for _, pv := range f.values("delivery-limit", merge) {
		var l int
		var src string
		set := false
		polN, polOK := intValue(pv.n)
		switch {
		case pv.set && polOK && hasArg && argOK:
			l, src, set = merge(polN, argN), "the x-delivery-limit argument and "+pv.from, true
		case pv.set && polOK:
			l, src, set = polN, pv.from, true
		case hasArg && argOK:
			l, src, set = argN, "its x-delivery-limit argument", true
		case hasArg || pv.set:
			// A value RabbitMQ would not take as a number: it falls back
			// to its default, which on 4.x is a limit.
			l, src, set = 20, "a delivery-limit RabbitMQ does not read as a number", v4
		}
		if !set {
			if !v4 {
				continue // RabbitMQ 3.x: no limit
			}
			l, src = 20, "RabbitMQ 4's default for a quorum queue that sets none"
		}
		if v4 && l < 0 {
			continue // none
		}
		worst(l, src)
	}
	if unlimited {
		switch {
		case v4 && hasArg:
			from = "x-delivery-limit " + fmt.Sprint(arg)
		case v4:
			from = "a delivery-limit policy of -1"
		default:
			from = "no x-delivery-limit argument or delivery-limit policy"
		}
	}
	return limit, from, unlimited
}

// delays names the delayed retry (RabbitMQ 4.3 and later) that would hold
// back a message handed back one way: kind "returned" (basic.nack) or
// "failed" (a reject or a closed channel). A delayed-retry-type of "all"
// or of kind does, from the queue's x-delayed-retry-type argument or a
// policy (a policy wins). "" when none may be in force, and always on a
// broker before 4.3.
func (f *queueFacts) delays(b broker, kind string) string {
	if !b.nackUncounted() {
		return ""
	}
	arg, hasArg := f.Arguments["x-delayed-retry-type"]
	for _, pv := range f.values("delayed-retry-type", nil) {
		t, src := "", ""
		switch {
		case pv.set:
			t, src = fmt.Sprint(pv.n), pv.from
		case hasArg:
			t, src = fmt.Sprint(arg), "its x-delayed-retry-type argument"
		}
		if t == "all" || t == kind {
			return fmt.Sprintf("delayed-retry-type %q from %s", t, src)
		}
	}
	return ""
}

// statusError is an answer of the management API other than 200 OK.
type statusError struct {
	code int
	text string
}

func (e *statusError) Error() string { return e.text }
