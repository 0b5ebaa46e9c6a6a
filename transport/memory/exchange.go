package memory

import (
	"strings"

	"github.com/acemq-go/acemq/transport"
)

// exchange is a declared exchange and its bindings. The broker's topology
// lock guards it.
type exchange struct {
	name       string
	kind       transport.ExchangeKind
	durable    bool
	autoDelete bool
	internal   bool
	args       transport.Table
	bindings   []*binding
	// direct indexes the bindings of a direct exchange by routing key.
	direct map[string][]*binding
}

// binding ties a queue to an exchange.
type binding struct {
	q     *queue
	key   string
	args  transport.Table
	words []string // topic pattern split on dots
	any   bool     // headers: x-match any
}

func newExchange(spec transport.ExchangeSpec) *exchange {
	return &exchange{
		name: spec.Name, kind: spec.Kind, durable: spec.Durable,
		autoDelete: spec.AutoDelete, internal: spec.Internal,
		args: copyTable(spec.Args), direct: map[string][]*binding{},
	}
}

func (x *exchange) bind(q *queue, key string, args transport.Table) {
	for _, b := range x.bindings {
		if b.q == q && b.key == key && equalTables(b.args, args) {
			return
		}
	}
	b := &binding{q: q, key: key, args: copyTable(args), words: strings.Split(key, ".")}
	if m, _ := args["x-match"].(string); m == "any" || m == "any-with-x" {
		b.any = true
	}
	x.bindings = append(x.bindings, b)
	x.direct[key] = append(x.direct[key], b)
}

func (x *exchange) unbind(q *queue, key string, args transport.Table) {
	keep := func(b *binding) bool { return !(b.q == q && b.key == key && equalTables(b.args, args)) }
	x.bindings = filterBindings(x.bindings, keep)
	if l := filterBindings(x.direct[key], keep); len(l) > 0 {
		x.direct[key] = l
	} else {
		delete(x.direct, key)
	}
}

// unbindQueue drops every binding to q (the queue is being deleted).
func (x *exchange) unbindQueue(q *queue) {
	keep := func(b *binding) bool { return b.q != q }
	x.bindings = filterBindings(x.bindings, keep)
	for k, l := range x.direct {
		if l = filterBindings(l, keep); len(l) > 0 {
			x.direct[k] = l
		} else {
			delete(x.direct, k)
		}
	}
}

func filterBindings(in []*binding, keep func(*binding) bool) []*binding {
	out := in[:0:0]
	for _, b := range in {
		if keep(b) {
			out = append(out, b)
		}
	}
	return out
}

// route appends to dst every queue m reaches through x, each once.
func (x *exchange) route(m *message, dst []*queue) []*queue {
	switch x.kind {
	case transport.Direct:
		for _, b := range x.direct[m.routingKey] {
			dst = addQueue(dst, b.q)
		}
	case transport.Fanout:
		for _, b := range x.bindings {
			dst = addQueue(dst, b.q)
		}
	case transport.Topic:
		var words []string
		for _, b := range x.bindings {
			if words == nil {
				words = strings.Split(m.routingKey, ".")
			}
			if topicMatch(b.words, words) {
				dst = addQueue(dst, b.q)
			}
		}
	case transport.Headers:
		for _, b := range x.bindings {
			if headersMatch(b, m.props.Headers) {
				dst = addQueue(dst, b.q)
			}
		}
	}
	return dst
}

func addQueue(dst []*queue, q *queue) []*queue {
	for _, d := range dst {
		if d == q {
			return dst
		}
	}
	return append(dst, q)
}

// topicMatch reports whether a routing key's words match a binding
// pattern: "*" is exactly one word, "#" zero or more.
func topicMatch(pattern, words []string) bool {
	for len(pattern) > 0 {
		p := pattern[0]
		if p == "#" {
			rest := pattern[1:]
			for len(rest) > 0 && rest[0] == "#" {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(words); i++ {
				if topicMatch(rest, words[i:]) {
					return true
				}
			}
			return false
		}
		if len(words) == 0 || (p != "*" && p != words[0]) {
			return false
		}
		pattern, words = pattern[1:], words[1:]
	}
	return len(words) == 0
}

// headersMatch applies a headers binding: x-match all (the default) or
// any over the binding's arguments that do not start with "x-". A nil
// binding value matches any header value of that name.
func headersMatch(b *binding, headers transport.Table) bool {
	matched, considered := 0, 0
	for k, want := range b.args {
		if strings.HasPrefix(k, "x-") {
			continue
		}
		considered++
		got, ok := headers[k]
		hit := ok && (want == nil || equalValue(want, got))
		if hit {
			matched++
			if b.any {
				return true
			}
		} else if !b.any {
			return false
		}
	}
	if b.any {
		return false
	}
	return matched == considered
}
