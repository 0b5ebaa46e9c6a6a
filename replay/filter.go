package replay

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/acemq-go/acemq"
)

// Predicate decides whether a dead-lettered message is selected: by
// Filter for a replay, by a console or a command for a listing. It must
// not settle the message.
type Predicate func(env acemq.Envelope, body []byte) bool

// The filter language, compiled by ParseFilter, selects dead-lettered
// messages. The language:
//
//	expr  := term { ("||" | "or") term }
//	term  := unary { ("&&" | "and") unary }
//	unary := ("!" | "not") unary | "(" expr ")" | field op literal
//	field := id | type | error | origin | correlation | causation | attempt |
//	         version | body | header.NAME
//	op    := == | != | ~ (contains) | !~ | < | <= | > | >=
//
// Literals are "double-quoted strings" or numbers. Example:
//
//	type == "OrderPlaced" && error ~ "timeout" && attempt >= 3
//
// Field names are case-insensitive; header.NAME reads an application
// header (absent reads as ""); the order operators compare numerically when
// both sides are numbers. An empty expression selects every message.
//
// FilterHelp is the language's one-paragraph summary, for a command's help.
const FilterHelp = `FILTER: field op literal, combined with && (and), || (or), ! (not) and parentheses.
  fields: id type error origin correlation causation attempt version body header.NAME (an application header)
  ops:    == != ~ (contains) !~ < <= > >=    literals: "text" or numbers
  e.g.    type == "OrderPlaced" && error ~ "timeout"`

type token struct {
	kind string // "id", "str", "num", "op", "(", ")", "eof"
	text string
	pos  int
}

func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for i < len(src) {
		r := rune(src[i])
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(' || r == ')':
			out = append(out, token{kind: string(r), text: string(r), pos: i})
			i++
		case r == '"':
			j := i + 1
			var b strings.Builder
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' && j+1 < len(src) {
					j++
				}
				b.WriteByte(src[j])
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("the string starting at position %d is not closed; end it with a double quote", i+1)
			}
			out = append(out, token{kind: "str", text: b.String(), pos: i})
			i = j + 1
		case strings.ContainsRune("=!<>~&|", r):
			for _, op := range []string{"==", "!=", "!~", "<=", ">=", "&&", "||", "<", ">", "~", "!"} {
				if strings.HasPrefix(src[i:], op) {
					out = append(out, token{kind: "op", text: op, pos: i})
					i += len(op)
					goto next
				}
			}
			return nil, fmt.Errorf("%q at position %d is not an operator; use one of == != ~ !~ < <= > >= && || or ! (not)", string(r), i+1)
		case unicode.IsDigit(r) || r == '-':
			j := i + 1
			for j < len(src) && (unicode.IsDigit(rune(src[j])) || src[j] == '.') {
				j++
			}
			out = append(out, token{kind: "num", text: src[i:j], pos: i})
			i = j
		case unicode.IsLetter(r) || r == '_':
			j := i
			for j < len(src) && (unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j])) || strings.ContainsRune("_.-", rune(src[j]))) {
				j++
			}
			w := src[i:j]
			switch strings.ToLower(w) {
			case "and":
				out = append(out, token{kind: "op", text: "&&", pos: i})
			case "or":
				out = append(out, token{kind: "op", text: "||", pos: i})
			case "not":
				out = append(out, token{kind: "op", text: "!", pos: i})
			default:
				out = append(out, token{kind: "id", text: w, pos: i})
			}
			i = j
		default:
			return nil, fmt.Errorf("%q at position %d is not allowed in a filter", string(r), i+1)
		}
	next:
	}
	return append(out, token{kind: "eof", pos: len(src)}), nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) take() token { t := p.toks[p.i]; p.i++; return t }

// ParseFilter compiles src into a Predicate. The error says where in src
// the problem is and what was expected; it never panics on any input.
// The Predicate is safe for concurrent use.
func ParseFilter(src string) (Predicate, error) {
	if strings.TrimSpace(src) == "" {
		return func(acemq.Envelope, []byte) bool { return true }, nil
	}
	toks, err := lex(src)
	if err != nil {
		return nil, fmt.Errorf("the filter %q does not parse: %s; fix it (acemq dlq replay --help shows the syntax)", src, err)
	}
	p := &parser{toks: toks}
	f, err := p.or()
	if err == nil && p.peek().kind != "eof" {
		err = fmt.Errorf("unexpected %q at position %d; join conditions with && or ||", p.peek().text, p.peek().pos+1)
	}
	if err != nil {
		return nil, fmt.Errorf("the filter %q does not parse: %s; fix it (acemq dlq replay --help shows the syntax)", src, err)
	}
	return f, nil
}

func (p *parser) or() (Predicate, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == "op" && p.peek().text == "||" {
		p.take()
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		a, b := l, r
		l = func(e acemq.Envelope, body []byte) bool { return a(e, body) || b(e, body) }
	}
	return l, nil
}

func (p *parser) and() (Predicate, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == "op" && p.peek().text == "&&" {
		p.take()
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		a, b := l, r
		l = func(e acemq.Envelope, body []byte) bool { return a(e, body) && b(e, body) }
	}
	return l, nil
}

func (p *parser) unary() (Predicate, error) {
	t := p.peek()
	switch {
	case t.kind == "op" && t.text == "!":
		p.take()
		f, err := p.unary()
		if err != nil {
			return nil, err
		}
		return func(e acemq.Envelope, body []byte) bool { return !f(e, body) }, nil
	case t.kind == "(":
		p.take()
		f, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != ")" {
			return nil, fmt.Errorf("expected ) at position %d", p.peek().pos+1)
		}
		p.take()
		return f, nil
	}
	return p.comparison()
}

var filterFields = map[string]bool{"id": true, "type": true, "error": true, "origin": true, "correlation": true,
	"causation": true, "attempt": true, "version": true, "body": true}

func (p *parser) comparison() (Predicate, error) {
	ft := p.take()
	if ft.kind != "id" {
		return nil, fmt.Errorf("expected a field name at position %d, found %q", ft.pos+1, ft.text)
	}
	field := ft.text
	lower := strings.ToLower(field)
	if !filterFields[lower] && !strings.HasPrefix(lower, "header.") {
		return nil, fmt.Errorf("unknown field %q; use id, type, error, origin, correlation, causation, attempt, version, body or header.NAME", field)
	}
	op := p.take()
	switch op.text {
	case "==", "!=", "~", "!~", "<", "<=", ">", ">=":
	default:
		return nil, fmt.Errorf("expected a comparison (== != ~ !~ < <= > >=) after %s at position %d", field, op.pos+1)
	}
	lit := p.take()
	if lit.kind != "str" && lit.kind != "num" {
		return nil, fmt.Errorf("expected a \"string\" or a number after %s %s at position %d", field, op.text, lit.pos+1)
	}
	var num float64
	isNum := lit.kind == "num"
	if isNum {
		n, err := strconv.ParseFloat(lit.text, 64)
		if err != nil {
			return nil, fmt.Errorf("%q at position %d is not a number", lit.text, lit.pos+1)
		}
		num = n
	}
	if (op.text == "~" || op.text == "!~") && isNum {
		return nil, fmt.Errorf("~ compares text; quote the value after %s", field)
	}
	want := lit.text
	return func(e acemq.Envelope, body []byte) bool {
		v := fieldValue(e, body, field)
		if isNum {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return op.text == "!="
			}
			switch op.text {
			case "==":
				return n == num
			case "!=":
				return n != num
			case "<":
				return n < num
			case "<=":
				return n <= num
			case ">":
				return n > num
			case ">=":
				return n >= num
			}
			return false
		}
		switch op.text {
		case "==":
			return v == want
		case "!=":
			return v != want
		case "~":
			return strings.Contains(v, want)
		case "!~":
			return !strings.Contains(v, want)
		case "<":
			return v < want
		case "<=":
			return v <= want
		case ">":
			return v > want
		case ">=":
			return v >= want
		}
		return false
	}, nil
}

// fieldValue is the text of one filter field on m.
func fieldValue(e acemq.Envelope, body []byte, field string) string {
	switch strings.ToLower(field) {
	case "id":
		return e.ID
	case "type":
		return e.Type
	case "error":
		return e.Error
	case "origin":
		return e.Origin
	case "correlation":
		return e.CorrelationID
	case "causation":
		return e.CausationID
	case "attempt":
		return strconv.Itoa(e.Attempt)
	case "version":
		return strconv.Itoa(e.Version)
	case "body":
		return string(body)
	}
	name := field[len("header."):]
	if v, ok := e.Header(name); ok {
		return fmt.Sprint(v)
	}
	return ""
}
